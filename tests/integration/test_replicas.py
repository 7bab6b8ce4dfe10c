"""Several replicas behind one comma-separated --host: the URL checks, the pick, and per-replica breakdowns that
match each replica's own ground truth."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import urllib.request

import pytest
from conftest import LOCUSTFILE, options, read_summary, run_local, run_locust, short_run, wait_for
from harness.output import error_lines
from harness.recording_server import RecordingServer

from llm_locust.errors import ConfigError
from llm_locust.report.build import build_report
from llm_locust.sim import run_sim
from llm_locust.transport.replicas import ReplicaSet, check_hosts, replica, split_hosts

SECRET = "s3cr3t-replica-pass"
USER = "replica-user-x7"  # a URL user name is registered as a secret process-wide: never a common word here


def test_split_and_check_every_url():
    assert split_hosts(" http://a:1 , http://b:2/ ") == ["http://a:1", "http://b:2/"]
    assert split_hosts("") == [] and split_hosts(None) == []
    check_hosts("http://127.0.0.1:8000,https://u:p@10.0.0.2:8443/base")  # fine
    with pytest.raises(ConfigError) as e:
        check_hosts(f"http://127.0.0.1:1,ftp://u:{SECRET}@h:2,,127.0.0.1:3,http://u:{SECRET}@,http://h:99999")
    lines = str(e.value).splitlines()
    assert len(lines) == 5, lines
    assert "unknown URL scheme 'ftp'" in lines[0] and "'ftp://h:2'" in lines[0]
    assert "empty URL" in lines[1]
    assert "'127.0.0.1:3' has no URL scheme" in lines[2]
    assert "names no server address" in lines[3]
    assert "port" in lines[4] and "h:99999" in lines[4]
    assert SECRET not in str(e.value)


def test_replica_credentials_become_auth_never_the_label():
    r = replica(f"http://{USER}:{SECRET}@127.0.0.1:8001/", several=True)
    assert r.url == "http://127.0.0.1:8001" and r.auth == (USER, SECRET)
    assert r.groups == (("replica", "http://127.0.0.1:8001"),)
    assert SECRET not in repr(r)
    assert replica("http://127.0.0.1:8001", several=False).groups == ()  # one replica: no breakdown


def test_round_robin_starts_at_the_process_index():
    replicas = ReplicaSet("http://a:1,http://b:2,http://c:3", "round-robin", start=1)
    picked = []
    for _ in range(6):
        with replicas.use() as r:
            picked.append(r.url)
    assert picked == ["http://b:2", "http://c:3", "http://a:1"] * 2
    assert replicas.in_flight == [0, 0, 0]
    with ReplicaSet("http://a:1").use() as only:
        assert only is None  # one replica: the session's base URL, no breakdown


def test_least_in_flight_picks_the_least_busy():
    replicas = ReplicaSet("http://a:1,http://b:2,http://c:3", "least-in-flight")
    with replicas.use() as first, replicas.use() as second, replicas.use() as third:
        assert [first.url, second.url, third.url] == ["http://a:1", "http://b:2", "http://c:3"]  # ties: in turn
        with replicas.use() as fourth:
            assert fourth.url == "http://a:1"
        assert replicas.in_flight == [1, 1, 1]
    with replicas.use() as a, replicas.use() as b:  # a is busy, b is busy: c is the least busy
        assert (a.url, b.url) == ("http://b:2", "http://c:3")
        with replicas.use() as c:
            assert c.url == "http://a:1"


def test_bad_urls_one_error_line_each_exit_2(tmp_path):
    code, output = short_run(tmp_path, f"http://127.0.0.1:1,ftp://u:{SECRET}@h:2,http://u:{SECRET}@")
    assert code == 2, output[-2000:]
    errors = error_lines(output)
    assert len(errors) == 2, errors
    assert "unknown URL scheme 'ftp'" in errors[0] and "names no server address" in errors[1]
    assert SECRET not in output and "Traceback" not in output


def test_several_hosts_need_the_fast_client():
    opts = options("--host", "http://127.0.0.1:1,http://127.0.0.1:2", "--client", "openai-sdk", "--model", "m")
    from llm_locust.config.settings import Settings
    from llm_locust.transport.tls import check_connection

    with pytest.raises(ConfigError, match="several --host URLs need the fast client"):
        check_connection(opts.host, Settings.from_options(opts).endpoint)


def test_per_replica_counts_equal_each_replicas_trace(tmp_path):
    """Master + 2 workers, 3 replicas, 90 requests: each replica's breakdown counts exactly the requests its own
    trace holds, the breakdowns sum to the total, round-robin splits them evenly, and the per-replica TTFT is the
    simulator's."""
    with run_sim("--replicas", "3", "--ttft-ms", "30", "--itl-ms", "5", "--output-tokens", "8") as sim:
        proc = run_locust(LOCUSTFILE, "--host", sim.host, "-u", "6", "-r", "6", "-t", "60s", "--processes", "2",
                          "--max-requests", "90", "--results-dir", str(tmp_path), "--max-tokens", "8")  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        traces = {replica.url: replica.trace() for replica in sim.replicas}
    summary = read_summary(tmp_path)
    total = summary["throughput"]
    assert total["requests_ok"] == 90 and total["requests_failed"] == 0
    rows = {row["label"]: row for row in summary["breakdowns"]["replica"]}
    assert set(rows) == set(traces)
    for url, trace in traces.items():
        served = [r for r in trace if r["endpoint"] == "chat" and not r["cancelled"]]
        assert rows[url]["requests_ok"] == len(served), (url, rows[url]["requests_ok"], len(served))
        assert rows[url]["metrics"]["ttft_ms"]["count"] == len(served)
        assert 15 <= len(served) <= 45  # round-robin: 30 each when the 6 users split 3 + 3
        assert 30 <= rows[url]["metrics"]["ttft_ms"]["p50"] < 60  # the simulator's 30 ms, plus the way there
    assert sum(row["requests_ok"] for row in rows.values()) == total["requests_ok"]
    assert sum(row["metrics"]["e2e_ms"]["count"] for row in rows.values()) == summary["metrics"]["e2e_ms"]["count"]
    page = build_report([tmp_path], png=False).html_path.read_text()  # the report's Breakdowns section
    assert "by replica" in page and all(f">{url}</td>" in page for url in traces)


def test_least_in_flight_favours_the_fast_replica(tmp_path):
    """A replica 50x slower than the other: least-in-flight sends it a small share; both counts match the traces."""
    with (
        run_sim("--ttft-ms", "500", "--itl-ms", "5", "--output-tokens", "4") as slow,
        run_sim("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "4") as fast,
    ):
        opts = options("--host", f"{slow.url},{fast.url}", "--balance", "least-in-flight", "--max-tokens", "4",
                       "--results-dir", str(tmp_path))  # fmt: skip
        run_local(opts, users=2, seconds=3)
        slow_served = sum(not r["cancelled"] for r in slow.trace())
        fast_served = sum(not r["cancelled"] for r in fast.trace())
    rows = {row["label"]: row["requests_ok"] for row in read_summary(tmp_path)["breakdowns"]["replica"]}
    assert rows[slow.url] <= slow_served and rows[fast.url] <= fast_served  # a request cut by the stop is not counted
    # one user keeps the slow replica busy (<= 6 requests of 0.5 s in 3 s), the other one streams from the fast one
    assert rows[slow.url] <= 7 and rows[fast.url] >= 10 * rows[slow.url], rows


def test_live_view_shows_each_replica(tmp_path, monkeypatch):
    """While the run goes, the LLM view's JSON has a breakdown per replica, and its page a place to show it."""
    from harness.web_ui import http, local_runner_with_web_ui

    monkeypatch.setattr(sys, "argv", ["locust", "-f", str(LOCUSTFILE)])  # Locust's UI parses sys.argv
    with run_sim("--replicas", "2", "--ttft-ms", "10", "--itl-ms", "2", "--output-tokens", "8") as sim:
        opts = options("--host", sim.host, "--max-tokens", "8", "--results-dir", str(tmp_path), "--interval-s", "1")
        env, runner, web_ui, ui = local_runner_with_web_ui(opts)
        try:
            runner.start(2, spawn_rate=2)

            def both_replicas():
                snap = json.loads(http(f"{ui}/llm/stats.json"))
                rows = ((snap.get("summary") or {}).get("breakdowns") or {}).get("replica") or []
                return len(rows) == 2 and all(row["requests_ok"] > 0 for row in rows) and (snap, rows)

            snap, rows = wait_for(both_replicas, 20, "both replicas in the live view")
            assert snap["state"] in ("spawning", "running") and not snap["final"]
            assert {row["label"] for row in rows} == {replica.url for replica in sim.replicas}
            assert 'id="breakdowns"' in http(f"{ui}/llm").decode()
        finally:
            runner.quit()
            env.events.quitting.fire(environment=env, reverse=True)
            web_ui.stop()


def test_replica_credentials_go_to_that_replica_only_and_never_into_files(tmp_path):
    """Credentials in one replica's URL: Basic auth on that replica's requests only, never in the results."""
    with RecordingServer() as plain, RecordingServer() as guarded:
        guarded_url = guarded.url.replace("http://", f"http://{USER}:{SECRET}@")
        opts = options("--host", f"{plain.url},{guarded_url}", "--max-tokens", "4", "--results-dir", str(tmp_path))
        run_local(opts, users=2, seconds=1)
    basic = "Basic " + base64.b64encode(f"{USER}:{SECRET}".encode()).decode()
    plain_posts = [r for r in plain.requests if r["method"] == "POST"]
    guarded_posts = [r for r in guarded.requests if r["method"] == "POST"]
    assert plain_posts and guarded_posts
    assert all("authorization" not in r["headers"] for r in plain.requests)
    assert all(r["headers"]["authorization"] == basic for r in guarded_posts)
    rows = {row["label"]: row["requests_ok"] for row in read_summary(tmp_path)["breakdowns"]["replica"]}
    assert set(rows) == {plain.url, guarded.url}
    for url, posts in ((plain.url, plain_posts), (guarded.url, guarded_posts)):
        assert 0 <= len(posts) - rows[url] <= 2  # each of the 2 users may be cut mid-request by the stop
    for path in tmp_path.iterdir():
        assert SECRET not in path.read_text(errors="replace"), path


def test_sim_replicas_are_independent_servers():
    """sim --replicas 2: two ports, each with its own trace; --replicas 0 is refused (exit 2)."""
    with run_sim("--replicas", "2", "--ttft-ms", "1", "--itl-ms", "1", "--output-tokens", "2") as sim:
        first, second = sim.replicas
        assert first.port != second.port and sim.host == f"{first.url},{second.url}"
        body = json.dumps({"model": "llm-locust-sim", "prompt": "hi", "max_tokens": 2}).encode()
        request = urllib.request.Request(f"{second.url}/v1/completions", data=body)
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
        assert len(second.trace()) == 1 and first.trace() == []
    proc = subprocess.run([sys.executable, "-m", "llm_locust.cli", "sim", "--replicas", "0"], capture_output=True,
                          text=True, timeout=30)  # fmt: skip
    assert proc.returncode == 2 and "--replicas must be at least 1" in proc.stderr
