"""An API key given on the command line never reaches the web UI's page, and a test started from
the form with the key field left empty still uses it."""

from __future__ import annotations

import json

from conftest import LOCUSTFILE, read_summary, wait_for
from harness.web_ui import http, locust_web_ui, wait_for_page

from llm_locust.sim import run_sim

KEY = "sk-cli-SECRET-0a9b8c7d"


def test_command_line_key_is_not_in_the_page_and_still_used(tmp_path):
    with run_sim("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "8", "--api-key", KEY) as sim:
        command = ["-f", str(LOCUSTFILE), "--host", sim.url, "--api-key", KEY, "--results-dir", str(tmp_path)]
        with locust_web_ui(*command) as web:
            ui = web.url
            html = wait_for_page(ui, 20)
            assert "api_key" in html and KEY not in html  # the field is there, its value is not
            form = {"user_count": 2, "spawn_rate": 2, "host": sim.url, "max_tokens": "8", "api_key": "",
                    "interval_s": "1"}  # fmt: skip
            assert json.loads(http(f"{ui}/swarm", form))["success"] is True

            def requests_done() -> bool:
                stats = json.loads(http(f"{ui}/stats/requests"))["stats"]
                return any(s["name"] == "/v1/chat/completions" and s["num_requests"] >= 4 for s in stats)

            wait_for(requests_done, 20, "requests")
            assert KEY not in http(ui).decode()
            http(f"{ui}/stop", {})
            summary = wait_for(lambda: (tmp_path / "summary.json").exists() and read_summary(tmp_path), 20, "summary")
        output = web.output
    assert summary["throughput"]["requests_ok"] > 0 and summary["failures"] == {}  # the key was sent: no 401
    assert KEY not in output
    for path in tmp_path.iterdir():
        assert KEY not in path.read_text(errors="replace"), path
