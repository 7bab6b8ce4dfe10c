"""Every request the server received is counted: none is sent once the test began to stop its users, and each one the
stop cut is in summary.json's `unfinished` — the simulator's trace holds exactly summary.json's ok + failed +
cancelled + unfinished requests and requests.jsonl's lines (one per finished request). Repeated: users start requests
in the last milliseconds of a run only by chance, and a stop that sends one in 1 run of 3 must fail."""

from __future__ import annotations

import json
import time

import gevent
import pytest
from conftest import LOCUSTFILE, ChatUser, new_env, options, read_summary, run_local, run_locust
from locust import constant_throughput, task

from llm_locust.results.request_lines import REQUESTS_FILE
from llm_locust.runtime.pacer import Pacer
from llm_locust.runtime.users import LLMUser
from llm_locust.sim import run_sim

RUNS = 3
USERS = 8


class PacedScenario(LLMUser):
    """A scenario paced by Locust's `constant_throughput`: its users wake together, right before the stop too."""

    wait_time = constant_throughput(20)

    @task
    def ask(self):
        self.llm.chat.completions.create(messages=[{"role": "user", "content": "Name a river."}], max_tokens=16)


@pytest.fixture(scope="module")
def sim():
    with run_sim("--ttft-ms", "20", "--itl-ms", "5", "--output-tokens", "16") as sim:
        yield sim


def counted(results) -> tuple[int, int]:
    """(summary.json's ok + failed + cancelled + unfinished requests, requests.jsonl's lines) of a results folder."""
    summary = read_summary(results)
    t = summary["throughput"]
    cut = summary["unfinished"]["requests"]
    lines = (results / REQUESTS_FILE).read_text().splitlines()
    assert len(lines) == t["requests_ok"] + t["requests_failed"] + t["requests_cancelled"]
    assert all(json.loads(line)["outcome"] in ("ok", "failed", "cancelled") for line in lines)
    return t["requests_ok"] + t["requests_failed"] + t["requests_cancelled"] + cut, len(lines)


@pytest.mark.parametrize(
    ("users", "extra"),
    [([ChatUser], ()), ([PacedScenario], ()), ([ChatUser], ("--request-rate", "40"))],
    ids=["closed-loop", "constant-throughput", "open-loop"],
)
def test_the_servers_trace_and_the_results_count_the_same_requests(sim, tmp_path, users, extra):
    """Local runner, `USERS` users stopped after 1.5 s, `RUNS` times: trace == counted == lines + unfinished."""
    seen = []
    for run in range(RUNS):
        sim.reset()
        results = tmp_path / str(run)
        opts = options("--host", sim.url, "--model", "llm-locust-sim", "--max-tokens", "16", "--requests-jsonl",
                       "--results-dir", str(results), *extra)  # fmt: skip
        run_local(opts, users=USERS, seconds=1.5, user_classes=users)
        total, lines = counted(results)
        seen.append((len(sim.trace()), total, lines))
    assert all(trace == total for trace, total, _ in seen), seen  # (trace, summary's count, requests.jsonl's lines)
    assert all(lines > 0 for *_, lines in seen), seen


def test_two_processes_count_every_request_the_server_received(sim, tmp_path):
    """`locust --processes 2` (a master and two workers), `USERS` users, `RUNS` times: the same count."""
    seen = []
    for run in range(RUNS):
        sim.reset()
        results = tmp_path / str(run)
        proc = run_locust(
            LOCUSTFILE, "-u", str(USERS), "-r", str(USERS), "--run-time", "2s", "--processes", "2",
            "--host", sim.url, "--model", "llm-locust-sim", "--max-tokens", "16", "--requests-jsonl",
            "--results-dir", str(results), timeout_s=60,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        total, lines = counted(results)
        seen.append((len(sim.trace()), total, lines))
    assert all(trace == total for trace, total, _ in seen), seen
    assert all(lines > 0 for *_, lines in seen), seen


def test_a_request_ended_while_its_user_waits_for_a_gap_between_sends_is_counted(sim, tmp_path, monkeypatch):
    """An open loop's ended request waits for a gap between the other users' sends before its report
    (`Pacer.yield_to_sends`); a user stopped in that wait reports it first. Here no gap ever comes (the wait lasts
    longer than the run), so every request is ended and waiting when the stop kills its user: each must be counted."""
    monkeypatch.setattr(Pacer, "yield_to_sends", lambda self: gevent.sleep(60))
    opts = options("--host", sim.url, "--model", "llm-locust-sim", "--max-tokens", "16", "--requests-jsonl",
                   "--results-dir", str(tmp_path), "--request-rate", "20")  # fmt: skip
    sim.reset()
    run_local(opts, users=4, seconds=1.0)
    total, lines = counted(tmp_path)
    assert len(sim.trace()) == total == lines == 4  # each user's one request, ended, reported at the stop


class SlowStartScenario(LLMUser):
    """A scenario whose task prepares for 0.6 s before its first call."""

    @task
    def ask(self):
        gevent.sleep(0.6)
        self.llm.chat.completions.create(messages=[{"role": "user", "content": "Name a river."}], max_tokens=4)


def test_a_graceful_stop_lets_a_task_end_but_begins_no_new_request(sim, tmp_path):
    """--stop-timeout 5: a user in its task when the stop begins ends it, but a task that has not sent its first
    request yet sends none (its user stops at once, not at the end of the grace): the server gets no request."""
    sim.reset()
    opts = options("--host", sim.url, "--model", "llm-locust-sim", "--results-dir", str(tmp_path))
    env = new_env(opts, [SlowStartScenario])
    env.stop_timeout = 5.0
    runner = env.create_local_runner()
    env.events.init.fire(environment=env, runner=runner, web_ui=None)
    runner.start(USERS, spawn_rate=USERS)
    gevent.sleep(0.3)  # every user 0.3 s into its preparation
    started = time.monotonic()
    runner.quit()
    stopped_s = time.monotonic() - started
    env.events.quitting.fire(environment=env, reverse=True)
    assert sim.trace() == [] and stopped_s < 2.5, stopped_s  # 0.3 s left of each preparation, no 5 s grace waited
    assert read_summary(tmp_path)["unfinished"]["requests"] == 0


def test_requests_cut_by_stopping_their_users_before_the_test_stops_are_counted(tmp_path):
    """Users stopped in the middle of their request before sends are held — Locust kills a user it finds waiting
    (whose wait may just have ended and its next request gone: a graceful stop's race, seen once in three runs of the
    fault matrix on a loaded machine) or ramps users down — cut that request: it is in `unfinished` at the test's end,
    with those the end itself cut. Here a ramp-down from 4 users to 2 kills 2 mid-request (their answers take 2 s),
    and the end the other 2: the server got 4 requests, 4 are unfinished."""
    with run_sim("--ttft-ms", "2000", "--output-tokens", "4") as slow:
        opts = options("--host", slow.url, "--model", "llm-locust-sim", "--max-tokens", "4", "--requests-jsonl",
                       "--results-dir", str(tmp_path))  # fmt: skip
        env = new_env(opts)
        runner = env.create_local_runner()
        env.events.init.fire(environment=env, runner=runner, web_ui=None)
        runner.start(4, spawn_rate=4)
        gevent.sleep(0.5)  # each user's request in flight, its answer 1.5 s away
        runner.start(2, spawn_rate=4)  # a ramp-down: 2 users killed (no --stop-timeout)
        gevent.sleep(0.3)
        runner.quit()
        env.events.quitting.fire(environment=env, reverse=True)
        trace = slow.trace()
    summary = read_summary(tmp_path)
    assert len(trace) == 4 and all(r["cancelled"] for r in trace)
    assert counted(tmp_path) == (4, 0)
    assert summary["unfinished"]["requests"] == summary["unfinished"]["no_token"] == 4, summary["unfinished"]
