"""How many streamed token events/s can ONE llm-locust worker process consume, and how exactly?

For each concurrency level it starts the simulator (fixed timing, pinned to one core) and one
headless Locust process (a LocalRunner = one worker, pinned to the other core) running
locustfiles/chat.py against it over 127.0.0.1 for a bounded time, then compares what the
client measured (summary.json) with what the simulator actually sent (its /sim/trace write
timestamps, same CLOCK_MONOTONIC clock):

- events/s: token events the client consumed per second of the run;
- client CPU %: of the Locust process during the run (100 % = one core saturated);
- ITL error p50 / p99: |client ITL percentile − server inter-write gap percentile|, ms;
- TTFT error p50 / p99: |client TTFT percentile − server (first token write − request
  received) percentile|, ms — includes loopback + HTTP cost, which is part of true TTFT;
- RSS: peak resident memory of the Locust process, MB.

    .venv/bin/python benchmarks/client_capacity.py [--streams 10,100,500] [--run-time-s 12]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llm_locust.gates import EXIT_GATE_FAILED  # noqa: E402
from llm_locust.sim import run_sim  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` (and its reaped children), seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def peak_rss_mb(pid: int) -> float:
    """Peak resident set size of `pid`, MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, round(p / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[k]


def pin(core: int | None):
    """A preexec_fn pinning a child process to `core` (None: no pinning)."""
    return None if core is None else lambda: os.sched_setaffinity(0, {core})


def run_level(streams: int, args: argparse.Namespace, cores: tuple[int | None, int | None]) -> dict:
    """One concurrency level; returns the table row."""
    sim_args = ("--ttft-ms", str(args.ttft_ms), "--itl-ms", str(args.itl_ms), "--output-tokens", str(args.tokens))
    with tempfile.TemporaryDirectory() as tmp, run_sim(*sim_args) as sim:
        if cores[0] is not None:
            os.sched_setaffinity(sim.pid, {cores[0]})
        command = [
            sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "chat.py"), "--headless",
            "--only-summary", "-u", str(streams), "-r", str(streams / args.stagger_s),
            "--run-time", f"{args.run_time_s}s", "--host", sim.url, "--max-tokens", str(args.tokens),
            "--ignore-eos", "--prompt-tokens", "16",
            "--results-dir", tmp, "--loglevel", "WARNING",
        ]  # fmt: skip
        proc = subprocess.Popen(
            command, preexec_fn=pin(cores[1]), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT
        )
        time.sleep(2.0 + args.stagger_s)  # start-up and spawn
        cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
        time.sleep(max(1.0, args.run_time_s - 3.0 - args.stagger_s))
        cpu1, t1 = cpu_seconds(proc.pid), time.monotonic()
        rss = peak_rss_mb(proc.pid)
        if proc.wait(timeout=args.run_time_s + 60) not in (0, EXIT_GATE_FAILED):  # 3: e.g. the client saturated
            raise SystemExit(f"locust exited with {proc.returncode} at {streams} streams")
        summary = json.loads((Path(tmp) / "summary.json").read_text())
        trace = [r for r in sim.trace() if not r.get("cancelled") and len(r["token_times"]) == args.tokens]
    m = summary["metrics"]
    events = m["itl_ms"]["count"] + m["ttft_ms"]["count"]
    server_itl = sorted((b - a) * 1e3 for r in trace for a, b in pairwise(r["token_times"]))
    server_ttft = sorted((r["token_times"][0] - r["t_recv"]) * 1e3 for r in trace)
    return {
        "streams": streams,
        "events_per_s": events / summary["throughput"]["duration_s"],
        "cpu_pct": 100 * (cpu1 - cpu0) / (t1 - t0),
        "itl_err_p50_ms": abs(m["itl_ms"]["p50"] - percentile(server_itl, 50)),
        "itl_err_p99_ms": abs(m["itl_ms"]["p99"] - percentile(server_itl, 99)),
        "ttft_err_p50_ms": abs(m["ttft_ms"]["p50"] - percentile(server_ttft, 50)),
        "ttft_err_p99_ms": abs(m["ttft_ms"]["p99"] - percentile(server_ttft, 99)),
        "server_itl_p99_ms": percentile(server_itl, 99),
        "failures": sum(summary["failures"].values()),
        "rss_mb": rss,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", default="10,100,500", help="comma-separated concurrency levels")
    parser.add_argument("--run-time-s", type=int, default=12, help="length of each level's run, seconds")
    parser.add_argument("--ttft-ms", type=float, default=50.0)
    parser.add_argument("--itl-ms", type=float, default=10.0)
    parser.add_argument("--tokens", type=int, default=128, help="output tokens per request")
    parser.add_argument(
        "--stagger-s",
        type=float,
        default=1.0,
        help="spread the users' start over this many seconds (1 = all at once: streams in phase)",
    )
    parser.add_argument("--json", default="", help="also write the rows to this JSON file")
    args = parser.parse_args()
    cores = (0, 1) if hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) >= 2 else (None, None)
    print(f"simulator core {cores[0]}, client core {cores[1]}; fixed timing TTFT {args.ttft_ms} ms, "
          f"ITL {args.itl_ms} ms, {args.tokens} tokens; {args.run_time_s} s per level, "
          f"users started over {args.stagger_s} s")  # fmt: skip
    header = (f"{'streams':>8} {'events/s':>10} {'CPU %':>6} {'ITL err p50':>12} {'p99 ms':>7} "
              f"{'TTFT err p50':>13} {'p99 ms':>7} {'fail':>5} {'RSS MB':>7}")  # fmt: skip
    print(header)
    rows = []
    for streams in (int(s) for s in args.streams.split(",")):
        row = run_level(streams, args, cores)
        rows.append(row)
        print(f"{row['streams']:>8} {row['events_per_s']:>10.0f} {row['cpu_pct']:>6.0f} "
              f"{row['itl_err_p50_ms']:>12.3f} {row['itl_err_p99_ms']:>7.3f} {row['ttft_err_p50_ms']:>13.3f} "
              f"{row['ttft_err_p99_ms']:>7.3f} {row['failures']:>5} {row['rss_mb']:>7.1f}", flush=True)  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
