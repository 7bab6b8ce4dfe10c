"""The Locust web UI with --processes 2: our options are form fields, a run started from the UI measures,
the LLM view's JSON and tab rows follow it (tests/e2e/test_web_ui_browser.py drives the same in Chromium)."""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import gevent
import pytest
from conftest import LOCUSTFILE, ROOT, options, read_summary, wait_for
from harness.web_ui import http, local_runner_with_web_ui, locust_web_ui

from llm_locust.runtime.saturation import CPU_WARN_PCT
from llm_locust.runtime.webui import SNAPSHOT_CACHE_S, report_available


def test_run_started_from_the_web_ui(fast_sim, tmp_path):
    secret = "sk-webui-SECRET-77aa"
    command = ["-f", str(LOCUSTFILE), "--processes", "2", "--host", fast_sim.url, "--results-dir", str(tmp_path)]
    with locust_web_ui(*command) as web:
        ui = web.url

        def ready() -> bool:
            try:
                return json.loads(http(f"{ui}/stats/requests")).get("workers") is not None
            except OSError:
                return False

        wait_for(ready, 20, "the web UI")
        page = http(ui).decode()
        for field in (
            "max_tokens",
            "prompt_tokens",
            "extra_body",
            "slo",
            "seed",
            "max_error_rate",
        ):
            assert field in page, field
        # a master's workers take the key and headers from their own environment: no secret field in its form
        assert '"api_key"' not in page and '"header"' not in page
        assert '"extended_tabs": [{"key": "llm", "title": "LLM"}]' in page and 'id="llm-view-link"' in page
        # what the browser's form sends: every field, empty ones as ""
        form = {"user_count": 4, "spawn_rate": 4, "host": fast_sim.url, "max_tokens": "8", "ignore_eos": "true",
                "interval_s": "1", "seed": "", "slo": "",
                "sweep_users": "", "model": "", "max_error_rate": "0.5", "max_drift_pct": ""}  # fmt: skip
        with pytest.raises(urllib.error.HTTPError, match="400") as refused:  # a key typed in anyway: nothing starts
            http(f"{ui}/swarm", {**form, "api_key": secret})
        assert "api_key: set only when llm-locust starts" in refused.value.read().decode()
        assert json.loads(http(f"{ui}/swarm", form))["success"] is True

        def llm_stats():
            snap = json.loads(http(f"{ui}/llm/stats.json"))
            return snap if snap["summary"] and snap["summary"]["throughput"]["requests_ok"] >= 8 else None

        snap = wait_for(llm_stats, 20, "LLM stats in the web UI")
        assert snap["state"] in ("spawning", "running") and snap["workers"] == 2 and not snap["final"]
        stats = json.loads(http(f"{ui}/stats/requests"))
        tab = {row["metric"]: row for row in next(t["data"] for t in stats["extended_stats"] if t["key"] == "llm")}
        assert tab["Users (now / max)"]["window"] == "4"
        rows = {(s["method"], s["name"]): s for s in stats["stats"]}
        assert set(rows) == {("POST", "/v1/chat/completions"), ("GET", "/v1/models"), ("", "Aggregated")}
        assert rows[("POST", "/v1/chat/completions")]["num_failures"] == 0
        for path in ("/stats/requests", "/", "/llm", "/llm/stats.json"):
            assert secret not in http(ui + path).decode(), path
        http(f"{ui}/stop", {})
        summary = wait_for(lambda: (tmp_path / "summary.json").exists() and read_summary(tmp_path), 20, "summary")
        final = wait_for(lambda: (s := json.loads(http(f"{ui}/llm/stats.json")))["final"] and s, 20, "final stats")
        assert final["summary"] == read_summary(tmp_path)
        assert json.loads(http(f"{ui}/llm/results/summary.json")) == final["summary"]
        if report_available():  # `llm-locust report` built from the results folder, on demand
            assert final["links"]["report"] == "llm/report"
            assert b"<html" in http(f"{ui}/llm/report", timeout_s=120)[:500].lower()
        else:
            assert final["links"]["report"] is None
            with pytest.raises(urllib.error.HTTPError, match="404"):
                http(f"{ui}/llm/report")
    output = web.output
    assert summary["throughput"]["requests_ok"] >= 8 and summary["failures"] == {}
    assert summary["metrics"]["output_tokens"]["max"] == 8  # the form's max_tokens reached the workers
    assert summary["settings"]["api_key_set"] is False and summary["run"]["workers_max"] == 2  # the refused key unused
    assert summary["settings"]["seed"] is None and summary["settings"]["slo"] == []  # empty fields: unset
    assert summary["settings"]["max_error_rate"] == 0.5 and summary["settings"]["max_drift_pct"] is None  # gates
    assert secret not in output
    for path in tmp_path.iterdir():
        assert secret not in path.read_text(errors="replace"), path


def test_sweep_steps_and_schedule_warning_live(fast_sim, tmp_path):
    """A rate sweep whose second step is more than 2 users can send: the view shows each step's status
    as it runs, warns that the open loop fell behind while the run still goes, and ends with summary.json's steps."""
    command = ["-f", str(ROOT / "locustfiles" / "sweep.py"), "--autostart",
               "--autoquit", "30", "--host", fast_sim.url,
               "--sweep-rates", "4,60", "--max-concurrency", "2", "--step-duration-s", "6", "--warmup-s", "1",
               "--arrival", "constant", "--interval-s", "1", "--max-tokens", "8",
               "--results-dir", str(tmp_path)]  # fmt: skip
    seen: dict[int, set[str]] = {0: set(), 1: set()}
    with locust_web_ui(*command) as web:
        ui = web.url

        def snapshot():
            try:
                return json.loads(http(f"{ui}/llm/stats.json"))
            except OSError:
                return None

        def warned_while_running():
            snap = snapshot()
            for step in (snap or {}).get("steps", []):
                seen[step["index"]].add(step["status"])
            running = snap is not None and snap["state"] in ("spawning", "running")
            return running and any("fell behind its schedule" in w for w in snap["warnings"]) and snap

        live = wait_for(warned_while_running, 25, "the behind-schedule warning during the run")
        stats = json.loads(http(f"{ui}/stats/requests"))
        tab = next(t["data"] for t in stats["extended_stats"] if t["key"] == "llm")
        assert any(row["metric"] == "Warning" and "fell behind" in row["run"] for row in tab)
        assert '"title": "LLM steps"' in http(ui).decode()
        final = wait_for(lambda: (s := snapshot()) is not None and s["final"] and s, 30, "the final summary")
        steps_tab = next(t["data"] for t in json.loads(http(f"{ui}/stats/requests"))["extended_stats"]
                         if t["key"] == "llm-steps")  # fmt: skip
    output = web.output
    assert live["steps"][-1]["status"] in ("warm-up", "measuring") and "measuring" in seen[0] | seen[1]
    summary = read_summary(tmp_path)
    assert [{k: v for k, v in s.items() if k != "status"} for s in final["steps"]] == summary["steps"]
    assert [s["status"] for s in final["steps"]] == ["done", "done"]
    assert [row["step"] for row in steps_tab] == ["0: rate=4/s", "1: rate=60/s"]
    assert [row["status"] for row in steps_tab] == ["done", "done"]
    assert steps_tab[1]["offered"] == "60.00" and float(steps_tab[1]["achieved"]) < 50  # 2 users
    assert "Traceback" not in output, output[-3000:]


@pytest.mark.alone  # the CPU samples of one process
def test_one_busy_cpu_sample_is_no_warning_and_in_flight_of_a_local_runner(fixed_sim, tmp_path, monkeypatch):
    """In process: a local runner with Locust's web UI; Locust's own CPU flag (set by its monitor after one sample
    above 90 %) is no saturation warning in the view — saturation is judged over sustained CPU with loop lag
    (`runtime.saturation.assess`, which speaks through the summary's warnings) — and requests in flight are this
    process's own."""
    monkeypatch.setattr(sys, "argv", ["locust", "-f", str(LOCUSTFILE)])  # Locust's UI parses sys.argv
    opts = options("--host", fixed_sim.url, "--max-tokens", "64", "--ignore-eos", "--results-dir", str(tmp_path))
    env, runner, web_ui, ui = local_runner_with_web_ui(opts)
    try:
        runner.start(3, spawn_rate=3)
        gevent.sleep(
            2.0
        )  # requests take 200 ms + 63 x 20 ms: some finished (the summary's warnings count), more in flight
        runner.cpu_warning_emitted, runner.current_cpu_usage = True, 97.0  # what Locust's CPU monitor sets
        gevent.sleep(SNAPSHOT_CACHE_S)
        snap = json.loads(http(f"{ui}/llm/stats.json"))
    finally:
        runner.quit()
        env.events.quitting.fire(environment=env, reverse=True)
        web_ui.stop()
    assert 1 <= snap["in_flight"] <= 3 and snap["users"] == 3 and snap["workers"] is None
    assert snap["summary"]["throughput"]["requests_ok"] >= 1  # the summary's warnings are the ones shown
    assert not any("saturated" in w or "CPU above" in w for w in snap["warnings"]), snap["warnings"]


AUTH_LOCUSTFILE = """
from flask_login import UserMixin, login_user
from locust import events

from llm_locust.runtime.plugin import install
from llm_locust.runtime.users import ChatCompletionsUser

install(events)


class ChatUser(ChatCompletionsUser):
    pass


class Tester(UserMixin):
    def __init__(self, user_id):
        self.id = user_id


@events.init.add_listener
def _auth(environment, web_ui=None, **_):
    if web_ui is not None:
        web_ui.app.secret_key = "test-only"
        web_ui.login_manager.user_loader(Tester)

        @web_ui.app.route("/test-login")
        def test_login():
            login_user(Tester("tester"))
            return "ok"
"""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


@pytest.mark.alone  # a web UI up within 20 s
def test_llm_view_is_behind_the_web_ui_login(fast_sim, tmp_path):
    locustfile = tmp_path / "auth_locustfile.py"
    locustfile.write_text(AUTH_LOCUSTFILE)
    command = ["-f", str(locustfile), "--web-login", "--host", fast_sim.url, "--results-dir", str(tmp_path)]
    cookies = urllib.request.HTTPCookieProcessor()
    browser = urllib.request.build_opener(cookies, _NoRedirect)
    with locust_web_ui(*command) as web:
        ui = web.url

        def status(path: str) -> int:
            try:
                with browser.open(ui + path, timeout=10) as response:
                    return response.status
            except urllib.error.HTTPError as e:
                return e.code
            except OSError:
                return 0

        wait_for(lambda: status("/login") == 200, 20, "the web UI")
        for path in ("/llm", "/llm/stats.json", "/llm/results/summary.json", "/llm/report"):
            assert status(path) == 302, path  # to the login page, like Locust's own pages
        assert status("/test-login") == 200
        with browser.open(f"{ui}/llm/stats.json", timeout=10) as response:
            snap = json.loads(response.read())
        assert snap["state"] == "ready" and snap["summary"] is None and status("/llm") == 200
        assert status("/llm/report") == 409 and status("/llm/results/summary.json") == 404  # no run yet
    output = web.output
    assert "Traceback" not in output, output[-3000:]


@pytest.mark.alone  # the hog's CPU share: 90 % of a core for 5 s, which a parallel pass's load broke up
def test_client_saturation_warning_live_in_the_view(fast_sim, tmp_path, monkeypatch):
    """The process running users is saturated (a greenlet holds its loop): /llm/stats.json says so
    while the run goes on, and the live summary has the process's CPU and loop-lag peaks."""
    monkeypatch.setattr(sys, "argv", ["locust", "-f", str(LOCUSTFILE)])
    opts = options("--host", fast_sim.url, "--results-dir", str(tmp_path))
    env, runner, web_ui, ui = local_runner_with_web_ui(opts)

    def hog() -> None:
        while True:
            busy_until = time.perf_counter() + 0.1
            while time.perf_counter() < busy_until:
                pass
            gevent.sleep(0.002)

    hogger = None
    try:
        runner.start(2, spawn_rate=2)
        hogger = gevent.spawn(hog)
        deadline = time.monotonic() + 20
        snap = {}
        while time.monotonic() < deadline:
            gevent.sleep(0.5)
            snap = json.loads(http(f"{ui}/llm/stats.json"))
            if any(w.startswith("client saturated: local") for w in snap["warnings"]):
                break
    finally:
        if hogger is not None:
            hogger.kill()
        runner.quit()
        env.events.quitting.fire(environment=env, reverse=True)
        web_ui.stop()
    client = snap["summary"]["client"]
    if client["processes"]["local"]["cpu_pct_max"] < CPU_WARN_PCT:  # the hog got less than a core: not saturated
        assert not any(w.startswith("client saturated") for w in snap["warnings"])
        pytest.skip(f"busy machine: the hog got at most {client['processes']['local']['cpu_pct_max']} % of a core")
    assert any(w.startswith("client saturated: local") for w in snap["warnings"]), snap.get("warnings")
    assert snap["final"] is False  # seen while the run was going on
    assert snap["summary"]["client"]["processes"]["local"]["lag_max_ms"] >= 30


def test_a_scenarios_names_are_a_live_breakdown(fast_sim, tmp_path):
    """locustfiles/scenarios/support_chat.py through master + 2 workers with the web UI: while the run goes the LLM
    view's JSON has a `name` breakdown, one entry per name; once final, its entries are summary.json's and each
    counts what Locust's own row of that name counts."""
    scenario = ROOT / "locustfiles" / "scenarios" / "support_chat.py"
    # the check fails most refund answers (by design): no error-rate gate
    command = ["-f", str(scenario), "--processes", "2", "--host", fast_sim.url, "--results-dir", str(tmp_path),
               "--autostart", "-u", "4", "-r", "4", "--run-time", "6s", "--autoquit", "30",
               "--max-error-rate", "1"]  # fmt: skip
    names = {"refund", "refund follow-up", "outage"}
    with locust_web_ui(*command) as web:
        ui = web.url

        def snapshot() -> dict | None:
            try:
                return json.loads(http(f"{ui}/llm/stats.json"))
            except OSError:
                return None

        def named_live() -> dict | None:
            snap = snapshot()
            entries = ((snap or {}).get("summary") or {}).get("breakdowns", {}).get("name", [])
            running = snap is not None and snap["state"] == "running"
            return snap if running and {entry["label"] for entry in entries} == names else None

        live = wait_for(named_live, 30, "the name breakdown in the live view while the run goes")
        final = wait_for(lambda: (s := snapshot()) is not None and s["final"] and s, 30, "the final summary")
        stats = json.loads(http(f"{ui}/stats/requests"))
        page = http(f"{ui}/llm").decode()
    assert not live["final"] and final["summary"] == read_summary(tmp_path)
    entries = {entry["label"]: entry for entry in final["summary"]["breakdowns"]["name"]}
    rows = {s["name"]: s for s in stats["stats"] if s["method"] == "POST"}
    assert set(entries) == set(rows) == names
    for name, entry in entries.items():
        assert rows[name]["num_requests"] == entry["requests_ok"] + entry["requests_failed"] > 0, name
        assert rows[name]["num_failures"] == entry["requests_failed"], name
    assert 'id="breakdowns"' in page  # where the page draws each dimension's table (the browser test reads it)
    assert "Traceback" not in web.output, web.output[-3000:]
