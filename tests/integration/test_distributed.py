"""Master + 2 workers in process (real ZeroMQ over loopback), and the `locust` CLI: --processes 2, and
master and worker processes started apart (one killed mid-run)."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

import gevent
import pytest
from conftest import (
    LOCUSTFILE,
    ROOT,
    free_port,
    new_env,
    options,
    quit_master,
    read_summary,
    run_locust,
    start_master_and_workers,
)
from harness.topology import master_args, worker_args
from locust.env import Environment

from llm_locust.metrics.gates import EXIT_GATE_FAILED
from llm_locust.metrics.recorder import delta_from_wire
from llm_locust.runtime.runner_ops import WIRE_KEY, reports_awaited

pytestmark = pytest.mark.alone  # exact counts through a master and workers, and a lost worker seen within seconds


def test_master_merges_exactly_what_the_workers_measured(fast_sim, tmp_path):
    opts = options("--host", fast_sim.url, "--max-tokens", "16", "--ignore-eos", "--results-dir", str(tmp_path),
                   "--interval-s", "1")  # fmt: skip
    sent = {"requests_ok": 0, "output_tokens": 0, "itl": 0}  # what the workers put on the wire
    sent_by_worker: Counter[str] = Counter()

    def count_sent(client_id, data):
        for window in delta_from_wire(data[WIRE_KEY]).windows.values() if WIRE_KEY in data else ():
            sent_by_worker[client_id] += window.requests_ok + window.requests_failed
            sent["requests_ok"] += window.requests_ok
            sent["output_tokens"] += window.output_tokens
            sent["itl"] += window.hist["itl"].get_total_count()

    master_env, master, _ = start_master_and_workers(  # after ours, count_sent sees our delta
        opts, on_worker=lambda _, env: env.events.report_to_master.add_listener(count_sent)
    )
    master.start(6, spawn_rate=6)
    gevent.sleep(4)
    quit_master(master_env)

    summary = read_summary(tmp_path)
    t = summary["throughput"]
    assert t["requests_ok"] > 10 and summary["failures"] == {}
    assert t["requests_ok"] == sent["requests_ok"]
    assert t["output_tokens"] == sent["output_tokens"] == 16 * t["requests_ok"]
    assert summary["metrics"]["itl_ms"]["count"] == sent["itl"] == 15 * t["requests_ok"]
    assert summary["run"]["role"] == "master" and summary["run"]["workers_max"] == 2
    assert summary["run"]["requests_by_worker"] == sent_by_worker and len(sent_by_worker) == 2
    post = master_env.stats.get("/v1/chat/completions", "POST")
    assert post.num_requests == t["requests_ok"]
    with (tmp_path / "llm_timeseries.csv").open() as f:
        assert sum(int(r["requests_ok"]) for r in csv.DictReader(f)) == t["requests_ok"]


def test_locust_cli_with_two_processes(fast_sim, tmp_path):
    """`locust -f locustfiles/chat.py --headless --processes 2`: results folder, CSVs, no secret leaked."""
    secret = "sk-test-DO-NOT-LEAK-4f1c2b"
    env = {**os.environ, "LLM_TEST_KEY": secret}
    config = tmp_path / "run.conf"  # llm-locust options from a Locust config file
    config.write_text("max-tokens = 16\nignore-eos = true\napi-key-env = LLM_TEST_KEY\ninterval-s = 1\n")
    proc = run_locust(
        LOCUSTFILE, "--config", str(config), "--processes", "2", "-u", "4", "-r", "4", "--run-time", "5s",
        "--host", fast_sim.url, "--csv", str(tmp_path / "locust"), "--csv-full-history", "--loglevel", "DEBUG",
        env=env, timeout_s=60,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]

    summary = read_summary(tmp_path)  # results default to the folder of --csv
    t = summary["throughput"]
    assert t["requests_ok"] > 5 and summary["failures"] == {}
    assert summary["run"]["role"] == "master" and summary["run"]["workers_max"] == 2
    assert summary["settings"]["api_key_set"] is True and summary["settings"]["interval_s"] == 1
    assert summary["metrics"]["output_tokens"]["min"] == summary["metrics"]["output_tokens"]["max"] == 16
    assert "TTFT ms" in proc.stdout and "LLM results:" in proc.stdout
    with (tmp_path / "locust_stats.csv").open() as f:
        rows = {(r["Type"], r["Name"]): r for r in csv.DictReader(f)}
    assert int(rows[("POST", "/v1/chat/completions")]["Request Count"]) == t["requests_ok"]
    assert set(rows) == {("POST", "/v1/chat/completions"), ("GET", "/v1/models"), ("", "Aggregated")}
    real = sum(int(rows[key]["Request Count"]) for key in rows if key[1] != "Aggregated")
    assert int(rows[("", "Aggregated")]["Request Count"]) == real  # LLM metrics are not request rows
    assert (tmp_path / "locust_stats_history.csv").stat().st_size > 0
    assert (tmp_path / "llm_timeseries.csv").stat().st_size > 0

    for path in tmp_path.glob("*.*"):
        if path != config:
            assert secret not in path.read_text(errors="replace"), path
    assert secret not in output


def test_a_worker_that_dies_is_reported_and_its_data_kept(fast_sim, tmp_path):
    opts = options("--host", fast_sim.url, "--max-tokens", "8", "--ignore-eos", "--results-dir", str(tmp_path))
    sent = {}  # worker index -> successful requests it reported

    def counting(i, worker_env):
        def count(client_id, data):
            windows = delta_from_wire(data[WIRE_KEY]).windows.values() if WIRE_KEY in data else ()
            sent[i] = sent.get(i, 0) + sum(w.requests_ok for w in windows)

        worker_env.events.report_to_master.add_listener(count)

    master_env, master, workers = start_master_and_workers(opts, on_worker=counting)
    master.start(4, spawn_rate=4)
    gevent.sleep(4)  # at least one report from each worker
    dead = workers[1]
    dead.user_greenlets.kill(block=True)  # dies without a word: no quit, no heartbeat, no report
    dead.greenlet.kill(block=True)
    gevent.sleep(6)  # the master's heartbeat checker marks it missing after ~3 s
    quit_master(master_env)

    summary = read_summary(tmp_path)
    assert summary["run"]["workers_lost"] == [dead.client_id]
    assert any("1 worker(s) stopped reporting" in w for w in summary["warnings"])
    assert sent[1] > 0  # the dead worker's reports before it died are in the totals
    assert summary["throughput"]["requests_ok"] == sent[0] + sent[1]


def test_a_killed_worker_process_fails_the_verdict_and_its_reported_data_is_kept(fast_sim, tmp_path):
    """The CLI as docker-compose runs it: master and two worker processes; one gets SIGKILL mid-run."""
    port = free_port()
    locustfile = str(LOCUSTFILE)
    config = str(ROOT / "deploy" / "llm-locust.conf")
    master_cmd = [*master_args(locustfile=locustfile, config=config, results_dir=str(tmp_path), host=fast_sim.url,
                               users=4, spawn_rate=4, run_time="24s"), f"--master-bind-port={port}"]  # fmt: skip
    worker_cmd = [*worker_args(locustfile, "127.0.0.1"), f"--master-port={port}"]
    locust = [sys.executable, "-m", "locust"]
    fast_sim.reset()
    log = tmp_path / "master.log"
    with log.open("w") as out:
        master = subprocess.Popen([*locust, *master_cmd], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    workers = []
    for i in range(2):
        with (tmp_path / f"worker{i}.log").open("w") as out:
            workers.append(subprocess.Popen([*locust, *worker_cmd], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT))
    try:
        deadline = time.monotonic() + 60
        while "All users spawned" not in log.read_text():
            logs = "".join(p.read_text()[-1500:] for p in sorted(tmp_path.glob("*.log")))
            assert time.monotonic() < deadline and master.poll() is None, logs
            time.sleep(0.2)
        time.sleep(11)  # both workers measure and report (every 3 s) for a while
        t_kill = time.perf_counter()  # CLOCK_MONOTONIC, the simulator's trace clock
        os.kill(workers[1].pid, signal.SIGKILL)
        code = master.wait(timeout=120)
        assert workers[0].wait(timeout=30) == 0
    finally:
        for proc in (master, *workers):
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)

    summary = read_summary(tmp_path)
    assert code == EXIT_GATE_FAILED, log.read_text()[-3000:]
    verdict = summary["verdict"]
    assert verdict["passed"] is False and verdict["exit_code"] == EXIT_GATE_FAILED
    (lost,) = summary["run"]["workers_lost"]
    assert verdict["reasons"][0] == f"worker lost: 1 worker(s) stopped reporting ({lost})"
    assert all(r.startswith("client saturated") for r in verdict["reasons"][1:])  # possible on a loaded machine
    assert "verdict: FAILED: worker lost" in log.read_text()
    # the master does not wait for the lost worker's last report (3 s + --stop-timeout: 28 s after its verdict before)
    lines = log.read_text().splitlines()
    stamps = [line[1:24] for line in lines if "verdict: FAILED" in line or "Shutting down" in line]
    verdict_s, shutdown_s = (datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp() for stamp in stamps[-2:])
    assert shutdown_s - verdict_s < 15, stamps  # (~1 s; generous for a loaded machine, and below the old 28 s)

    # kept: every request the server finished more than one report interval before the kill (both
    # workers'), and every one after it (the survivor's); the dead worker's last seconds may be lost
    served = [r for r in fast_sim.trace() if r["endpoint"] == "chat" and not r["cancelled"]]
    before = sum(r["t_done"] < t_kill - 4 for r in served)
    after = sum(r["t_done"] > t_kill + 1 for r in served)
    requests_ok = summary["throughput"]["requests_ok"]
    assert before + after <= requests_ok <= len(served), (before, after, requests_ok, len(served))
    assert before > 20 and after > 20
    with (tmp_path / "llm_timeseries.csv").open() as f:
        assert sum(int(r["requests_ok"]) for r in csv.DictReader(f)) == requests_ok
    processes = summary["client"]["processes"]  # each worker's CPU/RSS, from Locust's heartbeats
    assert lost in processes and processes[lost]["rss_mb_max"] > 20
    with (tmp_path / "workers_timeseries.csv").open() as f:
        assert {r["process"] for r in csv.DictReader(f)} == set(processes)


def test_the_runs_end_awaits_no_report_from_a_lost_worker():
    ran, reported = {"a", "b", "c"}, {"a"}
    assert reports_awaited(ran, reported, missing=set()) == {"b", "c"}
    assert reports_awaited(ran, reported, missing={"c"}) == {"b"}
    assert reports_awaited(ran, {"a", "b"}, missing={"c"}) == set()


@contextmanager
def master_and_worker() -> Iterator[tuple[Environment, Environment]]:
    """A master and a worker (real runners, ZeroMQ over loopback), each initialised as Locust does: their
    environments; both quit at the end."""
    master_env = new_env(options())
    master = master_env.create_master_runner("127.0.0.1", 0)
    master_env.events.init.fire(environment=master_env, runner=master, web_ui=None)
    worker_env = new_env(options())
    worker = worker_env.create_worker_runner("127.0.0.1", master.server.port)
    worker_env.events.init.fire(environment=worker_env, runner=worker, web_ui=None)
    try:
        yield master_env, worker_env
    finally:
        worker.quit()
        master.quit()


def test_each_role_registers_only_its_own_listeners():
    """A local runner, a master and a worker (real runners, ZeroMQ over loopback): each process's `RunState` has the
    parts of its role — a local runner the lead and the users part, a master only the lead, a worker only the users
    part — and Locust's events call only those parts' listeners."""
    from llm_locust.runtime.plugin import run_state

    def listeners(env):
        state = run_state(env)
        named = {"state": state, "lead": state.lead, "users": state.users}
        parts = {id(part): name for name, part in named.items() if part is not None}
        return (
            state.role.name,
            (state.lead is not None, state.users is not None),
            {
                name: [
                    f"{parts[id(h.__self__)]}.{h.__func__.__name__}"
                    for h in getattr(env.events, name)._handlers
                    if id(getattr(h, "__self__", None)) in parts
                ]
                for name in ("test_start", "request", "test_stop", "quitting", "report_to_master", "worker_report")
            },
        )

    local_env = new_env(options())
    local_env.create_local_runner()
    local_env.events.init.fire(environment=local_env, runner=local_env.runner, web_ui=None)
    try:
        with master_and_worker() as (master_env, worker_env):
            assert listeners(local_env) == ("local", (True, True), {
                "test_start": ["state._on_test_start"], "request": ["users._on_request"],
                "test_stop": ["users._on_users_stopped", "lead._on_test_stop"],
                "quitting": ["users.stop_auth", "lead._on_quitting"],
                "report_to_master": [], "worker_report": [],
            })  # fmt: skip
            assert listeners(master_env) == ("master", (True, False), {
                "test_start": ["state._on_test_start"], "request": [], "test_stop": ["lead._on_test_stop"],
                "quitting": ["lead._on_quitting"], "report_to_master": [], "worker_report": ["lead._on_worker_report"],
            })  # fmt: skip
            assert listeners(worker_env) == ("worker", (False, True), {
                "test_start": ["state._on_test_start"], "request": ["users._on_request"],
                "test_stop": ["users._on_users_stopped"], "quitting": ["users.stop_auth", "users._on_worker_quitting"],
                "report_to_master": ["users._on_report_to_master"], "worker_report": [],
            })  # fmt: skip
    finally:
        local_env.runner.quit()


def test_a_worker_parses_locusts_defaults_once():
    """Locust's worker builds its whole argument parser once per option of every spawn message
    (`runner_ops.parse_locust_defaults_once`): after a worker's init, Locust's defaults are one cached dict, equal to
    a fresh parse of them."""
    from locust import argument_parser

    parser = argument_parser.get_empty_argument_parser()
    argument_parser.setup_parser_arguments(parser)
    parser._default_config_files = {}
    fresh = vars(parser.parse([]))
    with master_and_worker():
        first = argument_parser.default_args_dict()
        assert argument_parser.default_args_dict() is first and first == fresh
