"""An API key given on the command line never reaches the web UI's page, and a test started from
the form with the key field left empty still uses it; the form cannot choose which of the process's secrets is
sent."""

from __future__ import annotations

import json
import secrets
import time

import pytest
from conftest import LOCUSTFILE, read_summary, wait_for
from harness.output import leaks
from harness.recording_server import RecordingServer
from harness.web_ui import http, locust_web_ui, post, template_args, ui_state, wait_for_page

from llm_locust.sim import run_sim

pytestmark = pytest.mark.alone  # a web UI process started and driven within fixed waits

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


def test_the_form_cannot_choose_which_secret_of_the_environment_is_sent(tmp_path, monkeypatch):
    """--provider decides which variable's key is sent, in which header (and --aws-region the scope of a SigV4
    signature): neither is a field of the form, and a POST /swarm carrying one is refused (HTTP 400, one line naming
    the field); no test starts and the server (the operator's own --host) receives nothing. Before, provider=azure
    sent AZURE_OPENAI_API_KEY's value in `api-key`, provider=databricks the Databricks token."""
    planted = {
        "AZURE_OPENAI_API_KEY": f"az-{secrets.token_hex(12)}",
        "DATABRICKS_TOKEN": f"dapi{secrets.token_hex(12)}",
    }
    for name, value in planted.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with RecordingServer() as server:
        command = ["-f", str(LOCUSTFILE), "--host", server.url, "--model", "m", "--results-dir", str(tmp_path)]
        with locust_web_ui(*command) as web:
            ui = web.url
            fields = set(template_args(wait_for_page(ui, 30))["extra_options"])
            good = {"user_count": 2, "spawn_rate": 2, "host": server.url, "max_tokens": "8", "deployment": "d"}
            answers = [post(f"{ui}/swarm", {**good, "provider": p}) for p in ("azure", "databricks", "bedrock")]
            answers.append(post(f"{ui}/swarm", {**good, "aws_region": "us-east-1"}))
            time.sleep(2)  # a started test's first requests would be there by now
            state = ui_state(ui)
    keyed = [
        r
        for r in server.requests
        if set(r["headers"].values()) & {*planted.values(), f"Bearer {planted['DATABRICKS_TOKEN']}"}
    ]
    assert server.requests == [], f"{len(server.requests)} requests, {len(keyed)} with a planted key"
    for (code, answer), field in zip(answers, ("provider", "provider", "provider", "aws_region"), strict=True):
        assert code == 400 and answer["success"] is False, answer
        assert (
            answer["message"].startswith(f"{field}: set only when llm-locust starts") and "\n" not in answer["message"]
        )
    assert state == "ready" and {"provider", "aws_region"}.isdisjoint(fields) and "deployment" in fields
    assert not leaks(web.output, tuple(planted.values()))
