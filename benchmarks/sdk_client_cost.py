"""CPU cost per token event: the fast client vs the openai SDK (`--client openai-sdk`).

For each client it starts the simulator (fixed timing, pinned to one core) and one headless
Locust process (one worker, pinned to the other core) streaming chat completions from it at a
fixed concurrency, then reports:

- events/s: token events the client consumed per second of the run;
- CPU %: of the Locust process over the middle of the run (100 % = one core);
- CPU µs/event: CPU time per token event (everything the process does, divided by events);
- ITL error p50 / p99: |client ITL percentile − the simulator's inter-write gap percentile|, ms.

    .venv/bin/python benchmarks/sdk_client_cost.py [--streams 20] [--run-time-s 12]
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

from client_capacity import ROOT, cpu_seconds, percentile, pin

from llm_locust.sim import run_sim


def run_client(client: str, args: argparse.Namespace, cores: tuple[int | None, int | None]) -> dict:
    """One run with `client` ('fast' or 'openai-sdk'); returns the table row."""
    sim_args = ("--ttft-ms", str(args.ttft_ms), "--itl-ms", str(args.itl_ms), "--output-tokens", str(args.tokens))
    with tempfile.TemporaryDirectory() as tmp, run_sim(*sim_args) as sim:
        if cores[0] is not None:
            os.sched_setaffinity(sim.pid, {cores[0]})
        command = [
            sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "chat.py"), "--headless",
            "--only-summary", "-u", str(args.streams), "-r", str(args.streams), "--run-time", f"{args.run_time_s}s",
            "--host", sim.url, "--max-tokens", str(args.tokens), "--ignore-eos", "--prompt-tokens", "16",
            "--client", client, "--results-dir", tmp, "--loglevel", "WARNING",
        ]  # fmt: skip
        proc = subprocess.Popen(
            command, preexec_fn=pin(cores[1]), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT
        )
        time.sleep(3.0)  # start-up and spawn
        cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
        time.sleep(max(1.0, args.run_time_s - 5.0))
        cpu1, t1 = cpu_seconds(proc.pid), time.monotonic()
        if proc.wait(timeout=args.run_time_s + 60) != 0:
            raise SystemExit(f"locust exited with {proc.returncode} with --client {client}")
        summary = json.loads((Path(tmp) / "summary.json").read_text())
        trace = [r for r in sim.trace() if not r.get("cancelled") and len(r["token_times"]) == args.tokens]
    m = summary["metrics"]
    events_per_s = (m["itl_ms"]["count"] + m["ttft_ms"]["count"]) / summary["throughput"]["duration_s"]
    cpu_share = (cpu1 - cpu0) / (t1 - t0)
    server_itl = sorted((b - a) * 1e3 for r in trace for a, b in pairwise(r["token_times"]))
    return {
        "client": client,
        "events_per_s": events_per_s,
        "cpu_pct": 100 * cpu_share,
        "cpu_us_per_event": 1e6 * cpu_share / events_per_s,
        "itl_err_p50_ms": abs(m["itl_ms"]["p50"] - percentile(server_itl, 50)),
        "itl_err_p99_ms": abs(m["itl_ms"]["p99"] - percentile(server_itl, 99)),
        "failures": sum(summary["failures"].values()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=20, help="concurrent streams")
    parser.add_argument("--run-time-s", type=int, default=12, help="length of each run, seconds")
    parser.add_argument("--ttft-ms", type=float, default=50.0)
    parser.add_argument("--itl-ms", type=float, default=10.0)
    parser.add_argument("--tokens", type=int, default=128, help="output tokens per request")
    args = parser.parse_args()
    cores = (0, 1) if hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) >= 2 else (None, None)
    print(f"{args.streams} streams, fixed timing TTFT {args.ttft_ms} ms, ITL {args.itl_ms} ms, {args.tokens} tokens; "
          f"simulator core {cores[0]}, client core {cores[1]}")  # fmt: skip
    print(f"{'client':>11} {'events/s':>9} {'CPU %':>6} {'CPU µs/event':>13} {'ITL err p50':>12} {'p99 ms':>7} "
          f"{'fail':>5}")  # fmt: skip
    for client in ("fast", "openai-sdk"):
        row = run_client(client, args, cores)
        print(f"{row['client']:>11} {row['events_per_s']:>9.0f} {row['cpu_pct']:>6.1f} "
              f"{row['cpu_us_per_event']:>13.1f} {row['itl_err_p50_ms']:>12.3f} {row['itl_err_p99_ms']:>7.3f} "
              f"{row['failures']:>5}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
