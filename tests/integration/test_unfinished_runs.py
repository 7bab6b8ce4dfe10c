"""A run in which no request finished says why, in one line and in summary.json's `diagnosis`, from how far the
requests the run's end cut had got (the pure parts: tests/unit/metrics/test_unfinished.py): a server that accepts
connections and never answers, through the real `locust` CLI; streams longer than the run, through a master and two
workers (each worker's count rides its stats report)."""

from __future__ import annotations

import gevent
from conftest import LOCUSTFILE, options, quit_master, read_summary, run_locust, start_master_and_workers
from harness.output import error_lines
from harness.sse_server import never_answer, serve

from llm_locust.sim import run_sim

RUN_S = 3


def test_a_server_that_never_answers_is_named_in_one_line(tmp_path):
    server = serve(never_answer)
    try:
        proc = run_locust(
            LOCUSTFILE, "-u", "2", "-r", "2", "--run-time", f"{RUN_S}s", "--host",
            f"http://127.0.0.1:{server.server_port}", "--model", "m", "--results-dir", str(tmp_path), timeout_s=60,
        )  # fmt: skip
    finally:
        server.stop()
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output[-3000:]  # nothing finished, for a reason outside the command
    summary = read_summary(tmp_path)
    assert summary["throughput"]["requests_ok"] == summary["throughput"]["requests_failed"] == 0
    cut = summary["unfinished"]
    assert cut["requests"] == cut["no_headers"] == 2 and RUN_S - 1 < cut["no_headers_longest_s"] < RUN_S + 5, cut
    diagnosis = summary["diagnosis"]
    assert diagnosis.startswith(f"no request finished: no response headers after {cut['no_headers_longest_s']:.1f} s")
    assert "(2 requests in flight)" in diagnosis and "check that --host is the inference server" in diagnosis
    errors = error_lines(output)
    assert len(errors) == 1 and errors[0].endswith(diagnosis), errors  # the console's one line
    assert "2 cut by the run's end, not counted" in proc.stdout


def test_streams_longer_than_the_run_name_max_tokens_through_master_and_workers(tmp_path):
    with run_sim("--ttft-ms", "10", "--itl-ms", "100") as sim:
        opts = options("--host", sim.url, "--model", "llm-locust-sim", "--max-tokens", "10000000", "--ignore-eos",
                       "--results-dir", str(tmp_path))  # fmt: skip
        master_env, master, _ = start_master_and_workers(opts)
        master.start(4, spawn_rate=4)
        gevent.sleep(RUN_S)
        quit_master(master_env)
    summary = read_summary(tmp_path)
    assert summary["throughput"]["requests_ok"] == summary["throughput"]["requests_failed"] == 0
    cut = summary["unfinished"]
    assert cut["requests"] == cut["streaming"] == 4, cut  # both workers' users, added up on the master
    assert RUN_S - 1 < cut["streaming_longest_s"] < RUN_S + 5, cut
    assert summary["diagnosis"] == (
        f"no request finished: first tokens arrived but no stream finished (4 requests in flight, the longest "
        f"{cut['streaming_longest_s']:.1f} s) — e.g. --max-tokens longer than the run: lower --max-tokens or "
        "lengthen --run-time"
    )
    assert master_env.process_exit_code == 1
