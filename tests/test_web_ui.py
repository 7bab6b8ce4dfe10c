"""The Locust web UI with --processes 2: our options are form fields, a run started from the UI measures."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request

from conftest import LOCUSTFILE, ROOT, free_port, read_summary


def http(url: str, form: dict | None = None) -> bytes:
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    with urllib.request.urlopen(url, data=data, timeout=10) as response:
        return response.read()


def wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def test_run_started_from_the_web_ui(fast_sim, tmp_path):
    secret = "sk-webui-SECRET-77aa"
    port = free_port()
    command = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--processes", "2",
               "--web-host", "127.0.0.1", "--web-port", str(port), "--host", fast_sim.url]  # fmt: skip
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ui = f"http://127.0.0.1:{port}"
    try:

        def ready() -> bool:
            try:
                return json.loads(http(f"{ui}/stats/requests")).get("workers") is not None
            except OSError:
                return False

        wait_for(ready, 20, "the web UI")
        page = http(ui).decode()
        for field in ("max_tokens", "prompt_tokens", "api_key", "extra_body", "results_dir", "max_error_rate"):
            assert field in page, field
        form = {"user_count": 4, "spawn_rate": 4, "host": fast_sim.url, "max_tokens": "8", "ignore_eos": "true",
                "results_dir": str(tmp_path), "interval_s": "1", "api_key": secret,
                "max_error_rate": "0.5", "max_drift_pct": ""}  # fmt: skip
        assert json.loads(http(f"{ui}/swarm", form))["success"] is True

        def llm_rows():
            stats = json.loads(http(f"{ui}/stats/requests"))["stats"]
            rows = {(s["method"], s["name"]): s for s in stats}
            ttft = rows.get(("LLM", "TTFT"))
            return rows if ttft and ttft["num_requests"] >= 8 else None

        rows = wait_for(llm_rows, 20, "LLM rows in the web UI")
        assert rows[("POST", "/v1/chat/completions")]["num_failures"] == 0
        assert secret not in http(f"{ui}/stats/requests").decode() and secret not in http(ui).decode()
        http(f"{ui}/stop", {})
        summary = wait_for(lambda: (tmp_path / "summary.json").exists() and read_summary(tmp_path), 20, "summary")
    finally:
        proc.terminate()
        output = proc.communicate(timeout=30)[0]
    assert summary["throughput"]["requests_ok"] >= 8 and summary["failures"] == {}
    assert summary["metrics"]["output_tokens"]["max"] == 8  # the form's max_tokens reached the workers
    assert summary["settings"]["api_key_set"] is True and summary["run"]["workers_max"] == 2
    assert summary["settings"]["max_error_rate"] == 0.5 and summary["settings"]["max_drift_pct"] is None  # gates
    assert secret not in output
    for path in tmp_path.iterdir():
        assert secret not in path.read_text(errors="replace"), path
