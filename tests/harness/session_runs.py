"""Sessions over a WebSocket (the Realtime APIs') against a simulator, checked against its trace: played at once on
sockets of the test's own (`play_sessions`, their turns' first delta and gaps held to the simulator's write times by
`assert_turns_agree`), run by a local runner with faults (`assert_faults_counted`), or by a locustfile through the
`locust` CLI, master + 2 worker processes (`sessions_through_workers`): what both Realtime API run tests share."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent
from conftest import options, read_summary, run_local, run_locust

from harness.trace_agreement import (
    assert_within,
    percentile,
    request_lines,
    served_first_ms,
    served_gaps_ms,
    tls_args,
)
from llm_locust.metrics.record import RequestRecord
from llm_locust.runtime.gc_policy import RunCollector
from llm_locust.sim import run_sim
from llm_locust.transport import patches, tls
from llm_locust.transport.timeouts import TimeoutWatchdog

Session = Callable[[str, Any, TimeoutWatchdog], list[RequestRecord]]
"""One session on its own socket: (the simulator's ws:// or wss:// URL, the TLS context, the watchdog) → its turns'
records."""


def play_sessions(
    session: Session, sessions: int, sim_args: tuple[str, ...], pki: Path, scheme: str, endpoint: str
) -> tuple[list[RequestRecord], dict[str, dict]]:
    """`sessions` sessions played at once against a simulator started with `sim_args` over `scheme` (https: wss://,
    trusting the test certificates), under a `RunCollector` as a run's (no collection pause of this big test process
    mid-stream); their records and the simulator's trace of `endpoint` by id."""
    patches.install()
    served, _trust = tls_args(pki, scheme)
    context = tls.client_context(str(pki / "ca.pem")) if scheme == "https" else None
    with run_sim(*sim_args, *served) as sim:
        watchdog = TimeoutWatchdog(10.0, 30.0)
        url = f"{'wss' if scheme == 'https' else 'ws'}://127.0.0.1:{sim.port}"
        collector = RunCollector()
        collector.start()
        jobs = [gevent.spawn(session, url, context, watchdog) for _ in range(sessions)]
        gevent.joinall(jobs, raise_error=True)
        collector.stop()
        trace = {r["id"]: r for r in sim.trace() if r["endpoint"] == endpoint}
        watchdog.stop()
    return [record for job in jobs for record in job.value], trace


def assert_faults_counted(results: Path, user_class: type, seed: int) -> None:
    """A local run of `user_class`'s sessions against a simulator drawing faults on its WebSockets (`--fault-seed
    seed`): an `error` event (`stream_error`) and a reset connection (`transport`) counted exactly as injected, each
    kind drawn twice at least, never raised into the scenario; a kind that is an HTTP stream's framing (`cut`) is not
    applied."""
    faults = ("--fault", "stream_error=0.2", "--fault", "reset=0.15", "--fault", "huge_chunk=0.1", "--fault", "cut=0.1")
    timing = ("--ttft-ms", "10", "--itl-ms", "3", "--output-tokens", "12")
    with run_sim(*timing, *faults, "--fault-seed", str(seed)) as sim:
        opts = options("--host", sim.url, "--results-dir", str(results), "--backoff-max-s", "0")
        run_local(opts, users=4, seconds=2, user_classes=[user_class], stop_timeout_s=5)
        trace = [r for r in sim.trace() if not r["cancelled"] or r["fault"] == "reset"]
    injected = Counter(r["fault"] for r in trace if r["fault"])
    assert min(injected[kind] for kind in ("stream_error", "reset", "huge_chunk")) >= 2, injected
    assert not injected["cut"]
    summary = read_summary(results)
    assert summary["failures"] == {"stream_error": injected["stream_error"], "transport": injected["reset"]}
    assert summary["throughput"]["requests_ok"] == len(trace) - injected["stream_error"] - injected["reset"]


def assert_turns_agree(records: list[RequestRecord], trace: dict[str, dict], label: str) -> None:
    """Each turn's first delta (from its `t_send`) and every gap between deltas against the simulator's write times:
    p50 within 1 ms, p99 within 3 ms (`assert_within`; within 1 ms idle, 3 allowed on a loaded machine)."""
    ours_first = [(record.t_first - record.t_send) * 1e3 for record in records]
    ours_gaps = [gap / 1e3 for record in records for gap in record.itl_us]
    served = list(trace.values())
    figures = {
        f"{name} {stat}": (percentile(ours, share), percentile(theirs, share))
        for name, ours, theirs in (("first delta", ours_first, served_first_ms(served)),
                                   ("gap", ours_gaps, served_gaps_ms(served)))
        for stat, share in (("p50", 0.5), ("p99", 0.99))
    }  # fmt: skip
    assert_within(figures, label)


USERS = 6
"""Users of the run: each may have one turn cut by the stop."""


def sessions_through_workers(
    locustfile: Path, url: str, trace_of: Any, endpoint: str, results: Path, requests: int, trust: tuple[str, ...]
) -> tuple[dict, list[dict], dict[str, dict]]:
    """Run `locustfile`'s sessions against the simulator at `url` until `requests` arrivals (`--max-requests`), then
    hold the run to the simulator's trace (`trace_of()`, its `endpoint` requests): 0 failures, every reported turn
    one the simulator answered — the stop cuts at most one turn per user, answered by the simulator and reported by
    nobody —, the tokens it counted. Returns the summary, requests.jsonl's lines and the answered turns by id."""
    proc = run_locust(locustfile, "--host", url, "--model", "llm-locust-sim", "-u", str(USERS), "-r", str(USERS),
                      "-t", "60s", "--processes", "2", "--max-requests", str(requests), "--requests-jsonl",
                      "--results-dir", str(results), *trust)  # fmt: skip
    trace = [r for r in trace_of() if r["endpoint"] == endpoint]
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_summary(results)
    t = summary["throughput"]
    lines = request_lines(results)
    reported = {line["request_id"] for line in lines}
    served = {r["id"]: r for r in trace if r["id"] in reported}
    assert len(served) == len(lines) and len(trace) - len(served) <= USERS
    assert summary["failures"] == {} and t["requests_ok"] == len(served) >= requests
    assert summary["run"]["role"] == "master" and summary["run"]["workers_max"] == 2
    assert t["output_tokens"] == sum(r["completion_tokens"] for r in served.values())
    assert t["prompt_tokens"] == sum(r["prompt_tokens"] for r in served.values())
    return summary, lines, served
