"""Synthetic Locust workers for a real llm-locust master: many worker identities in one process, each speaking
Locust's worker protocol and sending the reports a real llm-locust worker sends.

Each identity is one ZeroMQ DEALER socket (Locust's `rpc.Client` settings: its id as the socket identity, TCP
keep-alive) and does what `locust.runners.WorkerRunner` does on the wire: `client_ready` with Locust's version, a
`heartbeat` every second, on `spawn` a `spawning` then `spawning_complete` with the users it was given, a `stats`
report every 3 s (`WORKER_REPORT_INTERVAL`), on `quit` a last report and its own `quit`; and what an llm-locust worker
adds: `runtime.clock_sync`'s clock pings (`PINGS` every report interval, their answers kept by a
`load.clock.OffsetEstimator`, the offset reported with each report). llm-locust's master asks nothing more of a
worker (no handshake of its own: a worker's secrets are checked on the worker, `secret_wire`).

Each report carries what a real worker attaches in `users_part.UsersPart._on_report_to_master`, made by our own
code from synthetic `RequestRecord`s (every declared latency, prompt-length breakdowns, failed and cancelled
requests): the `MetricsRecorder` delta in its wire form (`delta_to_wire`) under `WIRE_KEY`, the requests in flight,
a `LoopMonitor` sample of this process, with `--request-lines` the `RequestLines` of the same records — and Locust's
own `stats`, `stats_total` and `errors` of those requests (`RequestStats`). The payloads are made once
(`Payloads`: a few variants per number of time windows a report spans) and sent with the current windows' starts:
what a master decodes and merges is a real report, while a process can carry hundreds of identities.

The delay from a report to its merge: right after a report an identity sends a heartbeat; the master handles one
peer's messages in order and merges a report in its `worker_report` listeners before it reads the next, so the
heartbeat's answer comes after the report was merged (`delays_ms`).

What every identity sent is added up (`Tally`: the counts summary.json shows, by our own `metric_stats`,
`throughput` and `breakdowns` of each payload): merged counts equal to it are exact (`mismatches`).

    python benchmarks/synthetic_workers.py --master-port 5557 --workers 100 --rounds 5 --out sent.json

`benchmarks/master_scale.py` runs a master with these; `tests/integration/test_master_scale.py` checks exactness.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

REPORT_S = 3.0
"""Locust's `WORKER_REPORT_INTERVAL`: a worker's stats report every 3 s."""
HEARTBEAT_S = 1.0
"""Locust's `HEARTBEAT_INTERVAL`."""
STATS_NAME = "/v1/chat/completions"
PER_PROCESS = 500
"""Identities per synthetic process at most (a ZeroMQ context holds 1,024 sockets by default)."""


def master_command(
    port: int,
    workers: int,
    run_time_s: int,
    results_dir: Path,
    interval_s: float = 5.0,
    request_lines: bool = False,
    extra: tuple[str, ...] = (),
    web_port: int | None = None,
) -> list[str]:
    """The real master: `locust` on locustfiles/chat.py, headless, bound to 127.0.0.1:`port`, waiting for `workers`
    (one user each), running `run_time_s` seconds, writing `results_dir`. Its --host is a closed port: a master sends
    no request. With `web_port`, its web UI serves on 127.0.0.1:`web_port` and the run starts by itself once the
    workers are there (`--autostart`), the process quitting when it ends."""
    mode = ("--headless",) if web_port is None else (
        "--autostart", "--autoquit", "0", "--web-host", "127.0.0.1", "--web-port", str(web_port))  # fmt: skip
    return [
        sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "chat.py"), "--master", *mode,
        "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port), "--expect-workers", str(workers),
        "-u", str(workers), "-r", str(workers), "--run-time", f"{run_time_s}s", "--stop-timeout", "0",
        "--host", "http://127.0.0.1:9", "--model", "synthetic", "--results-dir", str(results_dir),
        "--interval-s", str(interval_s), *(("--requests-jsonl",) if request_lines else ()), *extra,
    ]  # fmt: skip


PAYLOADS = ("full", "chat")
"""What the synthetic requests measure: `full`, every declared latency and count histogram and prompt-length
breakdowns (the most a report carries); `chat`, what locustfiles/chat.py's run with its defaults sends (closed loop
over http, fixed prompt lengths: no breakdown)."""


def synthetic_record(rng: random.Random, payload: str = "full") -> Any:
    """A finished chat request as the client's transport leaves it: 99.5 % successful (TTFT, ITL gaps, usage,
    prompt counts), 0.5 % failed (HTTP 500, some after a first token), one in ten on a new connection. `full` adds
    open-loop `t_sched`, TLS handshakes, 2 % cancelled requests, some tool calls and agent sessions' last steps, and
    the prompt-length group (`PAYLOADS`)."""
    from llm_locust.metrics.length_buckets import add_prompt_group
    from llm_locust.metrics.record import AgentSummary, ErrorKind, RequestRecord, ToolCall
    from llm_locust.metrics.request import RequestSpec

    t_send = 1000.0
    record = RequestRecord("chat", t_send=t_send)
    full = payload == "full"
    if full:
        record.t_sched = t_send - rng.uniform(0.0, 0.003)
    record.new_connection = rng.random() < 0.1
    if record.new_connection:
        record.connect_s = rng.uniform(0.0002, 0.002)
        if full:
            record.tls_handshake_s = rng.uniform(0.002, 0.01)
    record.t_headers = t_send + rng.uniform(0.01, 0.2)
    prompt = rng.choice((128, 512, 2048, 8192)) + rng.randint(0, 100) if full else 128
    record.spec = RequestSpec(b"", prompt, model="synthetic")
    kind = rng.random()
    if kind < 0.005:  # failed: before any token, or cut mid-stream
        if rng.random() < 0.5:
            record.t_first = record.t_headers + rng.uniform(0.0, 0.3)
        record.status_code = 500
        record.fail(ErrorKind.HTTP_5XX, "HTTP 500")
        if full:
            add_prompt_group(record)
        return record
    tokens = rng.randint(16, 256)
    record.status_code = 200
    record.t_first = record.t_first_content = record.t_headers + rng.uniform(0.0, 0.3)
    t = record.t_first
    for _ in range(tokens - 1):
        gap_s = rng.uniform(0.008, 0.03)
        record.itl_us.append(round(gap_s * 1e6))
        t += gap_s
    record.t_last = t
    record.t_done = t + 0.0005
    record.events = tokens
    if full and kind < 0.025:  # cancelled on purpose after its last token read
        record.cancelled = True
        record.local_output_tokens = tokens
        add_prompt_group(record)
        return record
    record.usage_completion_tokens = tokens
    record.prompt_tokens = prompt
    record.finish_reason = "stop" if rng.random() < 0.7 else "length"
    record.saw_done = True
    if not full:
        return record
    if rng.random() < 0.05:
        record.t_tool_call = t
        record.tool_calls = (ToolCall(f"call_{rng.randrange(10**9)}", "lookup", '{"q": "x"}'),)
    elif rng.random() < 0.03:  # an agent session's last step
        steps = rng.randint(2, 6)
        model_s = (t - t_send) * steps
        tool_s = rng.uniform(0.01, 0.5) * (steps - 1)
        record.agent = AgentSummary(steps, steps - 1, model_s + tool_s, model_s, tool_s, True)
    add_prompt_group(record)
    return record


class _Encoded:
    """A window whose wire form was made once (`WindowMetrics.to_wire`): all `delta_to_wire` asks of a window."""

    def __init__(self, wire: dict[str, Any]) -> None:
        self._wire = wire

    def to_wire(self) -> dict[str, Any]:
        return self._wire


@dataclass
class Payload:
    """One report's data made once: its windows' wire forms (by relative start, oldest first), its breakdowns, its
    request lines, Locust's stats of the same requests (made at `built_s`), and the counts it adds (`counts_of`)."""

    windows: list[_Encoded]
    groups: dict[Any, _Encoded]
    lines: bytes
    locust_stats: dict[str, Any]
    built_s: int
    counts: dict[str, int]
    requests: int


def counts_of(summary: dict[str, Any]) -> dict[str, int]:
    """The counts of a summary.json (or of one payload, the same shape) that merging must keep exact: requests and
    tokens, each metric's count, each breakdown's requests."""
    counts: dict[str, int] = {}
    for name in ("requests_ok", "requests_failed", "requests_cancelled", "output_tokens", "prompt_tokens"):
        counts[f"throughput.{name}"] = summary["throughput"][name]
    for name, stats in summary["metrics"].items():
        counts[f"metrics.{name}.count"] = stats["count"]
    for dimension, entries in summary["breakdowns"].items():
        for entry in entries:
            for name in ("requests_ok", "requests_failed", "requests_cancelled"):
                counts[f"breakdowns.{dimension}.{entry['label']}.{name}"] = entry[name]
    return counts


class Payloads:
    """`variants` payloads of `requests` requests for each number of time windows a report spans, made when first
    asked for (`get`)."""

    def __init__(self, requests: int, interval_s: float, seed: int, payload: str = "full", variants: int = 4) -> None:
        self.requests, self.interval_s, self.payload, self.variants = requests, interval_s, payload, variants
        self._rng = random.Random(seed)
        self._made: dict[tuple[int, int], Payload] = {}

    def get(self, windows: int, variant: int) -> Payload:
        key = (windows, variant % self.variants)
        payload = self._made.get(key)
        if payload is None:
            payload = self._made[key] = self._make(windows)
        return payload

    def key(self, windows: int, variant: int) -> str:
        return f"{windows}:{variant % self.variants}"

    def _make(self, windows: int) -> Payload:
        from locust.stats import RequestStats

        from llm_locust.metrics.recorder import MetricsRecorder
        from llm_locust.metrics.run_metrics import RunMetrics
        from llm_locust.results.request_lines import RequestLines
        from llm_locust.results.sections import breakdowns, metric_stats, throughput

        recorder = MetricsRecorder(self.interval_s)
        lines = RequestLines(1.0, None, 0)
        stats = RequestStats()
        for i in range(self.requests):
            record = synthetic_record(self._rng, self.payload)
            recorder.record(record, (i % windows) * self.interval_s + 0.5)  # spread over the windows it spans
            lines.add(record)
            if record.ok or record.cancelled:
                stats.log_request("POST", STATS_NAME, round((record.t_last - record.t_send) * 1000), 4096)
            else:
                stats.log_request("POST", STATS_NAME, round((record.t_headers - record.t_send) * 1000), 0)
                stats.log_error("POST", STATS_NAME, record.error_message)
        delta = recorder.take_delta()
        encoded = [_Encoded(delta.windows[key].to_wire()) for key in sorted(delta.windows)]
        groups = {key: _Encoded(window.to_wire()) for key, window in delta.groups.items()}
        run = RunMetrics()
        requests = delta.requests
        run.merge_delta(delta)  # what this payload adds to a master's run (the delta is released)
        counts = counts_of(
            {
                "throughput": throughput(run.total, 1.0),
                "metrics": metric_stats(run.total),
                "breakdowns": breakdowns(run, 1.0, ()),
            }
        )
        locust_stats = {
            "stats": stats.serialize_stats(),
            "stats_total": stats.total.get_stripped_report(),
            "errors": stats.serialize_errors(),
        }
        return Payload(encoded, groups, lines.take()[0], locust_stats, int(time.time()), counts, requests)


def restamped(locust_stats: dict[str, Any], shift_s: int) -> dict[str, Any]:
    """Locust's serialized stats made `shift_s` seconds ago, as if made now (its per-second counts and times)."""

    def entry(data: dict[str, Any]) -> dict[str, Any]:
        data = dict(data)
        for name in ("num_reqs_per_sec", "num_fail_per_sec"):
            data[name] = {second + shift_s: n for second, n in data[name].items()}
        for name in ("last_request_timestamp", "start_time"):
            if data.get(name) is not None:
                data[name] += shift_s
        return data

    errors = {key: {**error, "first_seen": None, "last_seen": None} for key, error in locust_stats["errors"].items()}
    return {
        "stats": [entry(e) for e in locust_stats["stats"]],
        "stats_total": entry(locust_stats["stats_total"]),
        "errors": errors,
    }


def window_starts(t_wall_s: float, interval_s: float) -> list[int]:
    """The starts of the time windows a report sent at `t_wall_s` spans (its requests finished in the last 3 s)."""
    from llm_locust.metrics.recorder import window_start

    first, last = window_start(t_wall_s - REPORT_S + 1e-6, interval_s), window_start(t_wall_s, interval_s)
    starts = [first]
    while starts[-1] < last:
        starts.append(window_start(starts[-1] + interval_s + 1e-6, interval_s))
    return starts


@dataclass
class Identity:
    """One synthetic worker: its socket, its state and what it sent."""

    id: str
    sock: Any
    state: str = "ready"
    users: dict[str, int] = field(default_factory=dict)
    rounds_left: int = 0
    acked: bool = False
    quit: bool = False
    pending: list[tuple[float, bool]] = field(default_factory=list)  # heartbeats awaiting the answer: (sent, after)
    sent: Counter[str] = field(default_factory=Counter)  # payload key -> times sent
    requests: int = 0
    reports: int = 0
    empty_reports: int = 0
    clock: Any = None  # its load.clock.OffsetEstimator


def run_identities(
    host: str,
    port: int,
    count: int,
    rounds: int,
    requests: int,
    interval_s: float,
    time_limit_s: float,
    seed: int,
    request_lines: bool,
    prefix: str,
    payload: str = "full",
) -> dict[str, Any]:
    """Run `count` identities against the master at `host`:`port` until the master tells them to quit (or
    `time_limit_s` passes); each sends `rounds` reports with data once its users are spawned. Returns what they sent
    and measured (`Tally`'s JSON)."""
    import gevent
    import zmq.green as zmq
    from locust import __version__
    from locust.rpc import Message
    from locust.runners import STATE_INIT, STATE_RUNNING, STATE_SPAWNING, STATE_STOPPED

    from llm_locust.load.clock import OffsetEstimator
    from llm_locust.metrics.recorder import Delta, GroupKey, WindowKey, delta_to_wire
    from llm_locust.metrics.unfinished import Unfinished
    from llm_locust.runtime.clock_sync import PING_MESSAGE, PINGS, PONG_MESSAGE
    from llm_locust.runtime.runner_ops import (
        CLOCK_KEY,
        IN_FLIGHT_KEY,
        REQUEST_LINES_DROPPED_KEY,
        REQUEST_LINES_KEY,
        SATURATION_KEY,
        UNFINISHED_KEY,
        WIRE_KEY,
    )
    from llm_locust.runtime.saturation import LoopMonitor

    payloads = Payloads(requests, interval_s, seed, payload)
    for windows in (1, 2):
        for variant in range(payloads.variants):
            payloads.get(windows, variant)
    context = zmq.Context()
    context.setsockopt(zmq.MAX_SOCKETS, count + 64)
    monitor = LoopMonitor()
    monitor.start()
    sample: dict[str, Any] = {"value": monitor.take(), "t": time.monotonic()}
    delays_ms: list[float] = []
    merged_last = {"t": 0.0}  # epoch s when the last report known merged was (its heartbeat answered)
    report_times: list[float] = []  # epoch s of each report with data
    spawned: list[float] = []  # epoch s of each spawn message handled
    rng = random.Random(seed)
    deadline = time.monotonic() + time_limit_s
    empty_stats = restamped({"stats": [], "stats_total": _empty_total(), "errors": {}}, 0)

    def send(identity: Identity, kind: str, data: Any = None) -> None:
        identity.sock.send(Message(kind, data, identity.id).serialize(), zmq.NOBLOCK)

    def saturation() -> dict[str, Any]:
        now = time.monotonic()
        if now - sample["t"] >= REPORT_S:  # one sample of this process per report interval, shared
            sample["value"], sample["t"] = monitor.take(), now
        return sample["value"]

    def report(identity: Identity, last: bool = False) -> bool:
        """Send one stats report; True when it carried data."""
        data: dict[str, Any] = {"user_classes_count": identity.users, "user_count": sum(identity.users.values())}
        now = time.time()
        if identity.rounds_left > 0 and not last:
            identity.rounds_left -= 1
            starts = window_starts(now, interval_s)
            variant = rng.randrange(payloads.variants)
            payload = payloads.get(len(starts), variant)
            delta = Delta(
                windows={WindowKey(s, -1, True): w for s, w in zip(starts, payload.windows, strict=True)},  # type: ignore[misc]
                groups={GroupKey(*key): w for key, w in payload.groups.items()},  # type: ignore[misc]
            )
            data.update(restamped(payload.locust_stats, int(now) - payload.built_s))
            data[WIRE_KEY] = delta_to_wire(delta)
            if request_lines:
                data[REQUEST_LINES_KEY] = payload.lines
                data[REQUEST_LINES_DROPPED_KEY] = 0
            identity.sent[payloads.key(len(starts), variant)] += 1
            identity.requests += payload.requests
            identity.reports += 1
            report_times.append(now)
        else:
            data.update(empty_stats)
            identity.empty_reports += 1
        if identity.state == STATE_STOPPED or last:
            data[UNFINISHED_KEY] = Unfinished().as_dict()
        data[IN_FLIGHT_KEY] = sum(identity.users.values()) if identity.rounds_left > 0 else 0
        data[SATURATION_KEY] = saturation()
        if identity.clock.best is not None:
            data[CLOCK_KEY] = identity.clock.best.to_wire()
        send(identity, "stats", data)
        return WIRE_KEY in data

    def heartbeat(identity: Identity, after_report: bool) -> None:
        identity.pending.append((time.perf_counter(), after_report))
        send(identity, "heartbeat", {"state": identity.state, "current_cpu_usage": 5.0, "current_memory_usage": 1e8})

    def listen(identity: Identity) -> None:
        while not identity.quit:
            msg = Message.unserialize(identity.sock.recv())
            match msg.type:
                case "ack":
                    identity.acked = True
                case "spawn":
                    send(identity, "spawning")
                    identity.state = STATE_SPAWNING
                    if not identity.users:
                        identity.rounds_left = rounds
                    identity.users = dict(msg.data["user_classes_count"])
                    users = sum(identity.users.values())
                    send(identity, "spawning_complete", {"user_classes_count": identity.users, "user_count": users})
                    spawned.append(time.time())
                    identity.state = STATE_RUNNING
                case kind if kind == PONG_MESSAGE:
                    identity.clock.add(msg.data["t_send_s"], time.time(), msg.data["t_master_s"])
                case "heartbeat":
                    if identity.pending:
                        t_sent, after_report = identity.pending.pop(0)
                        if after_report:
                            delays_ms.append((time.perf_counter() - t_sent) * 1000)
                            merged_last["t"] = time.time()
                case "stop":
                    identity.state = STATE_STOPPED
                    identity.users = {}
                    send(identity, "client_stopped")
                    identity.state = STATE_INIT
                    send(identity, "client_ready", __version__)
                case "quit":
                    identity.users = {}
                    report(identity, last=True)
                    send(identity, "quit")
                    identity.quit = True

    def beat(identity: Identity) -> None:
        t0 = time.monotonic() + rng.uniform(0.0, REPORT_S)  # workers start at different times
        gevent.sleep(max(0.0, t0 - time.monotonic()))
        tick = 0
        while not identity.quit and time.monotonic() < deadline:
            if identity.acked:
                if tick % round(REPORT_S / HEARTBEAT_S) == 0:
                    for _ in range(PINGS):
                        send(identity, PING_MESSAGE, {"t_send_s": time.time()})
                    heartbeat(identity, after_report=report(identity))  # its answer: the report merged
                else:
                    heartbeat(identity, after_report=False)
            tick += 1
            gevent.sleep(max(0.0, t0 + tick * HEARTBEAT_S - time.monotonic()))

    identities = []
    for i in range(count):
        sock = context.socket(zmq.DEALER)
        sock.setsockopt(zmq.TCP_KEEPALIVE, 1)
        sock.setsockopt(zmq.TCP_KEEPALIVE_IDLE, 30)
        name = f"{prefix}{i}_{uuid.uuid4().hex[:8]}"
        sock.setsockopt(zmq.IDENTITY, name.encode())
        sock.connect(f"tcp://{host}:{port}")
        identities.append(Identity(name, sock, clock=OffsetEstimator()))
    greenlets = []
    for identity in identities:
        send(identity, "client_ready", __version__)
        greenlets.append(gevent.spawn(listen, identity))
        greenlets.append(gevent.spawn(beat, identity))
    connect_by = time.monotonic() + 30.0
    while time.monotonic() < deadline and not all(i.quit for i in identities):
        gevent.sleep(0.2)
        if time.monotonic() > connect_by:  # Locust's worker sends client_ready again until acked
            for identity in identities:
                if not identity.acked:
                    send(identity, "client_ready", __version__)
            connect_by = time.monotonic() + 5.0
    gevent.sleep(0.5)  # the last messages leave
    gevent.killall(greenlets, timeout=2)
    for identity in identities:
        identity.sock.close(linger=500)
    context.term()
    monitor.stop()
    return {
        "identities": count,
        "acked": sum(i.acked for i in identities),
        "quit_by_master": sum(i.quit for i in identities),
        "reports_with_data": sum(i.reports for i in identities),
        "reports_empty": sum(i.empty_reports for i in identities),
        "requests_by_worker": {i.id: i.requests for i in identities if i.requests},
        "sent": dict(sum((i.sent for i in identities), Counter())),
        "counts": {payloads.key(w, v): payloads.get(w, v).counts for (w, v) in payloads._made},
        "lines": {payloads.key(w, v): payloads.get(w, v).lines.count(b"\n") for (w, v) in payloads._made},
        "delays_ms": delays_ms,
        "merged_last": merged_last["t"],
        "report_times": report_times,
        "spawned": spawned,
    }


def _empty_total() -> dict[str, Any]:
    """Locust's stats total of a worker that finished no request since its last report."""
    from locust.stats import RequestStats

    return RequestStats().total.get_stripped_report()


@dataclass
class Tally:
    """What all synthetic processes sent, added up."""

    identities: int = 0
    acked: int = 0
    quit_by_master: int = 0
    reports_with_data: int = 0
    reports_empty: int = 0
    lines: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    requests_by_worker: dict[str, int] = field(default_factory=dict)
    delays_ms: list[float] = field(default_factory=list)
    merged_last: float = 0.0
    report_times: list[float] = field(default_factory=list)
    spawned: list[float] = field(default_factory=list)

    def add(self, sent: dict[str, Any]) -> None:
        """Add one process's JSON (`run_identities`)."""
        for name in ("identities", "acked", "quit_by_master", "reports_with_data", "reports_empty"):
            setattr(self, name, getattr(self, name) + sent[name])
        for key, times in sent["sent"].items():
            for name, value in sent["counts"][key].items():
                self.counts[name] += times * value
            self.lines += times * sent["lines"][key]
        self.requests_by_worker.update(sent["requests_by_worker"])
        self.delays_ms.extend(sent["delays_ms"])
        self.merged_last = max(self.merged_last, sent["merged_last"])
        self.report_times.extend(sent["report_times"])
        self.spawned.extend(sent["spawned"])

    def mismatches(self, summary: dict[str, Any], results_dir: Path | None = None) -> list[str]:
        """What the master's summary.json (and requests.jsonl in `results_dir`, when given) counts otherwise than
        was sent, one line each (empty: exact)."""
        merged = counts_of(summary)
        problems = [
            f"{name}: merged {merged.get(name, 0)}, sent {self.counts.get(name, 0)}"
            for name in sorted(set(merged) | set(self.counts))
            if merged.get(name, 0) != self.counts.get(name, 0)
        ]
        by_worker = summary["run"]["requests_by_worker"]
        if by_worker != self.requests_by_worker:
            wrong = [w for w in set(by_worker) | set(self.requests_by_worker)
                     if by_worker.get(w) != self.requests_by_worker.get(w)]  # fmt: skip
            problems.append(f"requests_by_worker differs for {len(wrong)} workers, e.g. {sorted(wrong)[:3]}")
        if results_dir is not None:
            path = results_dir / "requests.jsonl"
            lines = path.read_bytes().count(b"\n") if path.exists() else 0
            if lines != self.lines:
                problems.append(f"requests.jsonl: {lines} lines, sent {self.lines}")
        return problems


def start_processes(
    port: int, workers: int, out_dir: Path, rounds: int, requests: int, interval_s: float, time_limit_s: float,
    request_lines: bool = False, seed: int = 1, payload: str = "full",
) -> list[tuple[Any, Path]]:  # fmt: skip
    """Start the synthetic worker processes (at most `PER_PROCESS` identities each) against 127.0.0.1:`port`;
    -> (process, its JSON output) each."""
    import subprocess

    started = []
    per = -(-workers // -(-workers // PER_PROCESS))
    for index, first in enumerate(range(0, workers, per)):
        out = out_dir / f"synthetic_{index}.json"
        command = [
            sys.executable, __file__, "--master-port", str(port), "--workers", str(min(per, workers - first)),
            "--rounds", str(rounds), "--requests", str(requests), "--interval-s", str(interval_s),
            "--time-limit-s", str(time_limit_s), "--seed", str(seed + index), "--prefix", f"synthetic{index}_",
            "--payload", payload, "--out", str(out), *(("--request-lines",) if request_lines else ()),
        ]  # fmt: skip
        started.append((subprocess.Popen(command, env={**os.environ, "PYTHONPATH": str(ROOT)}), out))
    return started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--master-host", default="127.0.0.1")
    parser.add_argument("--master-port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=10, help="worker identities in this process")
    parser.add_argument("--rounds", type=int, default=5, help="reports with data each identity sends once spawned")
    parser.add_argument("--requests", type=int, default=300, help="requests per report (100 req/s per worker)")
    parser.add_argument("--interval-s", type=float, default=5.0, help="the master's --interval-s (its windows)")
    parser.add_argument("--time-limit-s", type=float, default=120.0, help="quit after this long in any case")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--prefix", default=f"{socket.gethostname()}_synthetic_")
    parser.add_argument("--request-lines", action="store_true", help="reports carry --requests-jsonl lines")
    parser.add_argument("--payload", choices=PAYLOADS, default="full", help="what the requests measure (PAYLOADS)")
    parser.add_argument("--out", type=Path, required=True, help="write what was sent here (JSON)")
    args = parser.parse_args(argv)
    result = run_identities(
        args.master_host, args.master_port, args.workers, args.rounds, args.requests, args.interval_s,
        args.time_limit_s, args.seed, args.request_lines, args.prefix, args.payload,
    )  # fmt: skip
    args.out.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
