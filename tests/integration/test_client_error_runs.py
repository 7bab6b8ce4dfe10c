"""The client's error budget (summary.json `client_error`, docs/metrics.md "The client's error budget") against the
simulator's truth — its kernel receive time of each request and the instant before each token's write — with the
`locust` CLI: an idle client's bound holds its error and it is not client_limited; a client whose core is taken (a
scenario's own CPU work beside its streams: reads come ~20 ms late, tokens merge) is client_limited, exit code 5,
with a bound that still holds its error. Both runs are bounded (`-t`, `--stop-timeout`: every request ends)."""

from __future__ import annotations

import html
import math
from itertools import pairwise
from pathlib import Path

from conftest import LOCUSTFILE, read_summary, run_locust

from llm_locust.metrics.client_error import REMEDY, REMEDY_MACHINE, client_error_text, limited_reason
from llm_locust.metrics.gates import EXIT_CLIENT_LIMITED
from llm_locust.report.build import build_report
from llm_locust.runtime.saturation import CPU_WARN_PCT
from llm_locust.sim import run_sim

BURNER = '''
import time

import gevent
from locust import events

from llm_locust.runtime.plugin import install
from llm_locust.runtime.users import ChatCompletionsUser

install(events)


class ChatUser(ChatCompletionsUser):
    """Streams, as chat.py's."""


@events.test_start.add_listener
def take_the_core(environment, **_kwargs):
    """A scenario's own CPU work: 20 ms at a time, then the loop gets 1 ms."""

    def burn():
        while True:
            started = time.perf_counter()
            while time.perf_counter() - started < 0.02:
                pass
            gevent.sleep(0.001)

    gevent.spawn(burn)
'''


def quantile_ms(values_s: list[float], p: float) -> float:
    """The p-th percentile of `values_s` in ms, by the histograms' rank (the value at rank round(p·n/100), >= 1)."""
    ordered = sorted(values_s)
    return 1e3 * ordered[max(math.floor(p * len(ordered) / 100 + 0.5), 1) - 1]


def errors_ms(summary: dict, trace: list[dict]) -> dict[str, dict[str, float]]:
    """Each bounded percentile of the client minus the simulator's own: TTFT and E2E from the request's arrival to
    the first and last token's write, ITL between writes."""
    served = [r for r in trace if r["token_times"] and not r["cancelled"]]
    truth = {
        "ttft": [r["token_times"][0] - r["t_recv"] for r in served],
        "itl": [b - a for r in served for a, b in pairwise(r["token_times"])],
        "e2e": [r["token_times"][-1] - r["t_recv"] for r in served],
    }
    measured = summary["metrics"]
    return {
        name: {key: measured[f"{name}_ms"][key] - quantile_ms(values, float(key[1:])) for key in ("p50", "p99")}
        for name, values in truth.items()
    }


def run(tmp_path: Path, name: str, locustfile: Path) -> tuple[int, dict, dict]:
    """8 users for 6 s against a simulator writing 64 tokens 2 ms apart; (exit code, summary, errors ms)."""
    with run_sim("--ttft-ms", "20", "--itl-ms", "2", "--output-tokens", "64") as sim:
        proc = run_locust(locustfile, "--host", sim.url, "-u", "8", "-r", "8", "-t", "6s", "--stop-timeout", "5",
                          "--max-tokens", "64", "--ignore-eos", "--max-client-error-ms", "1",
                          "--results-dir", str(tmp_path / name))  # fmt: skip
        trace = sim.trace()
    summary = read_summary(tmp_path / name)
    assert summary["failures"] == {} and summary["throughput"]["requests_ok"] == len(trace) > 50, proc.stderr[-2000:]
    return proc.returncode, summary, errors_ms(summary, trace)


def assert_bound_holds(summary: dict, errors: dict) -> None:
    budget = summary["client_error"]
    for name, by_key in errors.items():
        for key, error_ms in by_key.items():
            assert abs(error_ms) <= budget[f"{name}_ms"][key], (name, key, error_ms, budget)


def test_an_idle_client_states_a_bound_that_holds_and_is_not_client_limited(tmp_path):
    """Not client_limited — unless other processes of a shared machine held the client's loop (its lag, at low CPU):
    then the run says so, and never tells an idle client to add processes. The bound holds either way."""
    code, summary, errors = run(tmp_path, "idle", LOCUSTFILE)
    budget = summary["client_error"]
    assert budget["kernel_timestamps"], budget
    lag_max_ms = summary["client"]["processes"]["local"]["lag_max_ms"]
    if budget["limited"]:  # a busy machine (2 cores shared by a dozen processes): its lag, not the client's CPU
        assert budget["remedy"] == REMEDY_MACHINE and lag_max_ms > 1.0 and code == EXIT_CLIENT_LIMITED, budget
    else:
        assert code == 0 and budget["itl_ms"]["p99"] <= 1.0 and budget["remedy"] is None, summary["verdict"]
    assert_bound_holds(summary, errors)


def test_a_client_whose_core_is_taken_is_client_limited_with_a_bound_that_holds(tmp_path):
    locustfile = tmp_path / "burner.py"
    locustfile.write_text(BURNER)
    code, summary, errors = run(tmp_path, "overloaded", locustfile)
    budget = summary["client_error"]
    assert code == EXIT_CLIENT_LIMITED and budget["limited"] and budget["zero_gaps"] > 100, budget
    # the remedy follows the process's CPU: near a core, more processes; on a machine whose other processes took
    # the core from it (2 cores shared by a dozen processes), where it runs
    busy = summary["client"]["processes"]["local"]["cpu_pct_max"] >= CPU_WARN_PCT
    remedy = REMEDY if busy else REMEDY_MACHINE
    assert budget["remedy"] == remedy and summary["verdict"]["reasons"][-1].endswith(remedy)
    assert errors["itl"]["p99"] > 1.0, errors  # the error is real: reads came late, tokens merged
    assert_bound_holds(summary, errors)
    # the report: the bounds in the Runs table, the limit and the remedy in a banner
    report = build_report([tmp_path / "overloaded"], tmp_path / "report.html", png=False)
    page = html.unescape(report.html_path.read_text())
    assert client_error_text(budget) in page and limited_reason(budget) in page
