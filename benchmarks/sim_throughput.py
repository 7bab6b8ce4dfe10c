"""How many token events per second the simulator emits on one core, and how late they are.

Starts `llm-locust sim` (fixed timing) as a subprocess pinned to CPU 0, then drives it from this
process (pinned to CPU 1) with a lean raw-asyncio client: N keep-alive connections over 127.0.0.1,
each streaming chat completions back to back (ignore_eos, fixed length) for a few seconds, at
each concurrency level in turn. Per level it prints:

- emitted ev/s: token events the simulator wrote per second inside the measurement window
  (from its ground-truth trace; the client's own count is shown next to it);
- sim CPU %: the simulator process's user+system CPU time over the window (/proc/PID/stat);
  100 % means its one core is saturated;
- lateness p50 / p99 / max (ms): actual write time minus due time (t_recv + TTFT + i*ITL) over
  every token of the level; it grows once the simulator cannot keep up.

Usage: .venv/bin/python benchmarks/sim_throughput.py [--streams 50,200,500] [--seconds 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
from dataclasses import dataclass
from time import perf_counter
from typing import Any

from llm_locust.sim import SimProcess, run_sim

_END_OF_BODY = b"\r\n0\r\n\r\n"


@dataclass
class ClientCounts:
    """What the client saw at one level."""

    events: int = 0
    responses: int = 0


class _StreamingClient(asyncio.Protocol):
    """Sends one request at a time on one connection and counts `data:` events."""

    def __init__(self, request: bytes, deadline_s: float, counts: ClientCounts, done: asyncio.Future[None]) -> None:
        self._request = request
        self._deadline_s = deadline_s
        self._counts = counts
        self._done = done
        self._tail = b""
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._transport.write(self._request)

    def data_received(self, data: bytes) -> None:
        self._counts.events += data.count(b"data: ")
        tail = (self._tail + data)[-len(_END_OF_BODY) :]
        self._tail = tail
        if tail != _END_OF_BODY:
            return
        self._counts.responses += 1
        self._tail = b""
        if perf_counter() < self._deadline_s:
            self._transport.write(self._request)  # type: ignore[union-attr]
        else:
            self._transport.close()  # type: ignore[union-attr]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._done.done():
            self._done.set_result(None)


async def _drive(port: int, streams: int, seconds: float, tokens: int) -> tuple[ClientCounts, float, float]:
    """Run `streams` connections for `seconds`; return counts and the window (perf_counter s)."""
    body = json.dumps(
        {
            "model": "llm-locust-sim",
            "messages": [{"role": "user", "content": "benchmark prompt"}],
            "max_tokens": tokens,
            "ignore_eos": True,
            "stream": True,
        }
    ).encode()
    request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n%b" % (
        len(body),
        body,
    )
    loop = asyncio.get_running_loop()
    counts = ClientCounts()
    start_s = perf_counter()
    deadline_s = start_s + seconds
    waiters = []
    for _ in range(streams):
        done: asyncio.Future[None] = loop.create_future()
        await loop.create_connection(
            lambda done=done: _StreamingClient(request, deadline_s, counts, done), "127.0.0.1", port
        )
        waiters.append(done)
    await asyncio.wait_for(asyncio.gather(*waiters), timeout=seconds + 30)
    return counts, start_s, deadline_s


def _cpu_s(pid: int) -> float:
    """Return user+system CPU seconds used so far by process `pid` (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def _measure_level(sim: SimProcess, args: argparse.Namespace, streams: int, run: Any) -> dict[str, float]:
    sim.reset()
    cpu_before_s = _cpu_s(sim.pid)
    wall_before_s = perf_counter()
    counts, start_s, end_s = run(_drive(sim.port, streams, args.seconds, args.tokens))
    cpu_pct = 100 * (_cpu_s(sim.pid) - cpu_before_s) / (perf_counter() - wall_before_s)
    ttft_s, itl_s = args.ttft_ms / 1e3, args.itl_ms / 1e3
    window_start_s = start_s + args.warmup_s
    in_window = 0
    lateness_ms: list[float] = []
    for record in sim.trace():
        due0_s = record["t_recv"] + ttft_s
        for i, t in enumerate(record["token_times"]):
            lateness_ms.append((t - (due0_s + i * itl_s)) * 1e3)
            if window_start_s <= t < end_s:
                in_window += 1
    lateness_ms.sort()
    client_token_events = counts.events - 2 * counts.responses  # minus role and [DONE] events
    return {
        "streams": streams,
        "demand": streams / itl_s * tokens_share(args),
        "emitted": in_window / (end_s - window_start_s),
        "client": client_token_events / (end_s - start_s),
        "cpu": cpu_pct,
        "p50": _percentile(lateness_ms, 0.50),
        "p99": _percentile(lateness_ms, 0.99),
        "max": lateness_ms[-1],
        "mean": statistics.fmean(lateness_ms),
    }


def tokens_share(args: argparse.Namespace) -> float:
    """Return the fraction of a request's time spent emitting at ITL (the rest is TTFT)."""
    busy_s = (args.tokens - 1) * args.itl_ms
    return args.tokens * args.itl_ms / (args.ttft_ms + busy_s + args.itl_ms)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", default="50,200,500", help="concurrent streams per level, comma-separated")
    parser.add_argument("--seconds", type=float, default=4.0, help="load duration per level, s")
    parser.add_argument("--warmup-s", type=float, default=0.5, help="excluded from the emitted rate, s")
    parser.add_argument("--ttft-ms", type=float, default=5.0, help="simulator TTFT, ms")
    parser.add_argument("--itl-ms", type=float, default=5.0, help="simulator ITL, ms")
    parser.add_argument("--tokens", type=int, default=64, help="tokens per response")
    args = parser.parse_args(argv)
    levels = [int(s) for s in args.streams.split(",")]
    try:
        import uvloop
    except ImportError:
        loop_factory = None
    else:
        loop_factory = uvloop.new_event_loop
    sim_args = ("--ttft-ms", str(args.ttft_ms), "--itl-ms", str(args.itl_ms), "--trace-limit", "10000000")
    pinned = hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2
    with run_sim(*sim_args) as sim, asyncio.Runner(loop_factory=loop_factory) as runner:
        if pinned:
            os.sched_setaffinity(sim.pid, {0})
            os.sched_setaffinity(0, {1})
        print(
            f"sim: fixed timing, TTFT {args.ttft_ms} ms, ITL {args.itl_ms} ms, {args.tokens} tokens/response;"
            f" sim {'pinned to CPU 0, client to CPU 1' if pinned else 'not pinned'}"
        )
        header = (
            f"{'streams':>7} {'demand ev/s':>11} {'emitted ev/s':>12} {'client ev/s':>11} {'sim CPU %':>9}"
            f" {'late p50 ms':>11} {'late p99 ms':>11} {'late max ms':>11}"
        )
        print(header)
        for streams in levels:
            row = _measure_level(sim, args, streams, runner.run)
            print(
                f"{row['streams']:>7.0f} {row['demand']:>11,.0f} {row['emitted']:>12,.0f} {row['client']:>11,.0f}"
                f" {row['cpu']:>9.0f} {row['p50']:>11.3f} {row['p99']:>11.3f} {row['max']:>11.3f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
