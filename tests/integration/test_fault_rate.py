"""The simulator's faults fire at their rate, whatever the timing: a fault at probability 1 strikes every request of
a real Locust run whose users all start at once and whose streams' tokens are produced together (ITL 0: every token
of a response due at the same instant, many responses finishing at the same instant), counted by the simulator's
trace and by the client."""

from __future__ import annotations

import re
import urllib.request

import pytest
from conftest import options, read_summary, run_local

from llm_locust.sim import run_sim

pytestmark = pytest.mark.alone  # fault counts against the trace, with faults 1 ms apart

USERS = 40


@pytest.mark.parametrize(
    ("fault", "counted_as", "itl_ms", "tokens"),
    [("bad_json", "bad_stream", "0", "8"), ("bad_json", "bad_stream", "1", "2"), ("cut", "incomplete", "0", "8"),
     ("bad_json", "bad_stream", "1", "1")],
    ids=["bad_json-every-token-at-once", "bad_json-two-tokens-1ms-apart", "cut-every-token-at-once",
         "bad_json-one-token"],
)  # fmt: skip
def test_a_rate_of_one_strikes_every_request(fault, counted_as, itl_ms, tokens, tmp_path):
    sim_args = ("--ttft-ms", "20", "--itl-ms", itl_ms, "--output-tokens", tokens, "--fault", f"{fault}=1.0")
    with run_sim(*sim_args) as sim:
        opts = options(
            "--host", sim.url, "--model", "llm-locust-sim", "--max-tokens", tokens, "--ignore-eos",
            "--results-dir", str(tmp_path), "--interval-s", "1",
        )  # fmt: skip
        run_local(opts, USERS, seconds=2, stop_timeout_s=10)
        trace = [r for r in sim.trace() if r["endpoint"] == "chat"]
        metrics = urllib.request.urlopen(f"{sim.url}/metrics", timeout=10).read().decode()
    # the users stopped with requests in flight: those the client closed before any token could get no fault
    gone = [r for r in trace if r["cancelled"]]
    assert all(not r["token_times"] for r in gone) and len(gone) <= USERS
    answered = [r for r in trace if not r["cancelled"]]
    assert len(answered) > 2 * USERS  # every user made several requests, the first ones all at the same instants
    assert [r["fault"] for r in answered] == [fault] * len(answered)
    # the client saw no request escape its fault: no success, every failure of the fault's kind
    summary = read_summary(tmp_path)
    assert summary["throughput"]["requests_ok"] == 0
    assert list(summary["failures"]) == [counted_as] and summary["failures"][counted_as] > 2 * USERS
    # a fault ending the stream frees its place once: the simulator's running gauge is back to 0, never below
    assert re.search(r'^vllm:num_requests_running\{model_name="llm-locust-sim"\} 0$', metrics, re.M), metrics
