"""Failures without an answer never become floods (`load.backoff`, `--backoff-max-s`): real runs against a closed port
and a server answering JSON instead of a stream. A closed-loop user whose requests fail before any response pauses,
longer each time; summary.json says how long (through the worker -> master wire too); `--backoff-max-s 0` brings the
old flood back; a healthy run never pauses; an open loop sends its arrivals whatever the answers.

Before backing off, 2 users against a closed port made 13,592 attempts in 8 s on a loaded 2-core machine (20,262 on a
quieter one), and 16,054 requests against the JSON server."""

from __future__ import annotations

import json
from typing import Any

import gevent
from conftest import LOCUSTFILE, options, quit_master, read_summary, run_local, run_locust, start_master_and_workers
from gevent.pywsgi import WSGIServer
from harness.recording_server import LoopbackServer

from llm_locust.config.link_auth import free_port

FEW = 100
"""The most attempts 2 users may make in a run of 6-8 s against a server that cannot answer: ~14 are expected (each
user at 0, 0.1, 0.3, 0.7, 1.5, 3.1, 6.3 s); thousands without backing off."""


class JsonServer(LoopbackServer):
    """Answers every POST with HTTP 200 and a whole chat completion as JSON (no stream), counting them (`posts`)."""

    def __init__(self) -> None:
        self.posts = 0
        self._server = WSGIServer(("127.0.0.1", 0), self._app, log=None, error_log=None)

    def _app(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        environ["wsgi.input"].read()
        self.posts += 1
        start_response("200 OK", [("Content-Type", "application/json")])
        choice = {"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}
        return [json.dumps({"object": "chat.completion", "choices": [choice]}).encode()]


def closed_port_url() -> str:
    """A loopback URL nothing listens on."""
    return f"http://127.0.0.1:{free_port()}"


def test_nothing_listening_costs_a_few_attempts_not_thousands(tmp_path):
    """The issue's case through the `locust` CLI: 2 users, 8 s, --model, a closed port."""
    proc = run_locust(LOCUSTFILE, "-u", "2", "-r", "2", "-t", "8s", "--host", closed_port_url(), "--model", "m",
                      "--results-dir", str(tmp_path), timeout_s=60)  # fmt: skip
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output[-3000:]
    summary = read_summary(tmp_path)
    attempts = summary["failures"]["connect"]
    assert summary["failures"] == {"connect": attempts} and 2 <= attempts <= FEW, output[-3000:]
    paused = summary["backoff"]
    assert attempts - 2 <= paused["pauses"] <= attempts  # each failure paused (the last may be cut by the stop)
    # both users paused nearly the whole run, and never longer than it
    assert 0.6 * 2 * 8 <= paused["paused_s"] <= 2 * summary["run"]["duration_s"] + 0.5
    assert f"Backed off: {paused['pauses']} pauses, " in output


def test_a_server_answering_json_instead_of_a_stream(tmp_path):
    with JsonServer() as server:
        env = run_local(options("--host", server.url, "--model", "m", "--results-dir", str(tmp_path)), 2, 6)
    summary = read_summary(tmp_path)
    failed = summary["failures"]["bad_stream"]
    assert 2 <= server.posts <= FEW
    # every request the server saw counted once, but those the stop cut short (one per user at most)
    assert summary["failures"] == {"bad_stream": failed} and server.posts - 2 <= failed <= server.posts
    assert env.stats.total.num_failures == failed
    assert failed - 2 <= summary["backoff"]["pauses"] <= failed


def test_backing_off_turned_off_floods_as_before(tmp_path):
    """`--backoff-max-s 0`: each user sends its next request as soon as the last one failed."""
    with JsonServer() as server:
        opts = options("--host", server.url, "--model", "m", "--results-dir", str(tmp_path), "--backoff-max-s", "0")
        run_local(opts, 2, 3)
    summary = read_summary(tmp_path)
    assert server.posts > 3 * FEW  # thousands on an idle machine
    assert server.posts - 2 <= summary["failures"]["bad_stream"] <= server.posts
    assert summary["backoff"] == {"pauses": 0, "paused_s": 0.0}
    assert summary["settings"]["backoff_max_s"] == 0.0


def test_a_healthy_run_never_pauses(fast_sim, tmp_path):
    run_local(options("--host", fast_sim.url, "--model", "llm-locust-sim", "--results-dir", str(tmp_path)), 2, 3)
    summary = read_summary(tmp_path)
    assert summary["throughput"]["requests_ok"] > 20 and summary["failures"] == {}
    assert summary["backoff"] == {"pauses": 0, "paused_s": 0.0}
    assert summary["settings"]["backoff_max_s"] == 5.0


def test_pauses_reach_the_master_from_its_workers(tmp_path):
    """The pauses are a counter of the worker deltas: the master's summary sums both workers' users."""
    opts = options("--host", closed_port_url(), "--model", "m", "--results-dir", str(tmp_path))
    master_env, master, _ = start_master_and_workers(opts)
    master.start(2, spawn_rate=2)
    gevent.sleep(5)
    quit_master(master_env)
    summary = read_summary(tmp_path)
    attempts = summary["failures"]["connect"]
    assert summary["run"]["workers_max"] == 2 and 2 <= attempts <= FEW
    assert attempts - 2 <= summary["backoff"]["pauses"] <= attempts
    assert summary["backoff"]["paused_s"] > 2 * 5 * 0.5


def test_an_open_loop_sends_its_arrivals_whatever_the_answers(tmp_path):
    """Open loop: no pause. The arrivals are the load asked for (20/s here), failed or not: none dropped, none sent
    late in a burst, and no more than are due."""
    opts = options("--host", closed_port_url(), "--model", "m", "--results-dir", str(tmp_path),
                   "--request-rate", "20", "--arrival", "constant")  # fmt: skip
    run_local(opts, 2, 4)
    summary = read_summary(tmp_path)
    attempts = summary["failures"]["connect"]
    assert 20 <= attempts <= 4 * 20 + 1  # the arrivals due in the run: a rate, not a flood
    assert summary["backoff"] == {"pauses": 0, "paused_s": 0.0}
