"""The client's overhead curve, after vLLM's method for its benchmark clients: a mock server with a fixed 50 ms TTFT
and 10 ms ITL, 1 to 1,000 concurrent streams, and how far what the client measures is from what the server did —
so that a measured TTFT or ITL can be trusted up to a known concurrency.

Each level is one `client_capacity.py` run (same simulator, same measurement window, same /sim/trace comparison;
see its docstring), llm-locust's fast client with 1 process (the simulator and the client pinned to a core each) and
with 2 processes (unpinned: this machine has 2 cores). Printed per level:

- events/s, CPU % (100 = one core) and CPU µs per token event of the client;
- TTFT − 50: the client's mean TTFT minus the configured 50 ms (vLLM's "TTFT error": what the client adds, the
  simulator's own delay included);
- TTFT err mean / p99: |client − simulator| for the mean and the 99th percentile (the simulator's own first-write
  times as the truth, its accept queue and loop delay taken out);
- ITL sd: the standard deviation of the client's ITL, and of the simulator's own inter-write gaps (the jitter that
  is the server's, not the client's); ITL err p99: |client p99 − simulator p99|.

    .venv/bin/python benchmarks/overhead_curve.py                      # 1,10,100,500,1000 streams, 1 and 2 processes
    .venv/bin/python benchmarks/overhead_curve.py --streams 1,10 --processes 1 --run-time-s 8

The rows also go to `--json`. Every run is bounded (`--run-time-s` per level) and talks to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import client_capacity

TTFT_MS, ITL_MS = 50.0, 10.0
COLUMNS = (
    ("proc", "processes", "{:>4}"),
    ("streams", "streams", "{:>7}"),
    ("events/s", "events_per_s", "{:>9.0f}"),
    ("CPU %", "cpu_pct", "{:>6.0f}"),
    ("µs/event", "cpu_us_per_event", "{:>8.1f}"),
    ("TTFT−50", "ttft_over_ms", "{:>8.2f}"),
    ("TTFT err mean", "ttft_mean_err_ms", "{:>13.3f}"),
    ("p99", "ttft_err_p99_ms", "{:>7.3f}"),
    ("ITL sd client", "itl_std_ms", "{:>13.3f}"),
    ("sim", "server_itl_std_ms", "{:>6.3f}"),
    ("ITL err p99", "itl_err_p99_ms", "{:>11.3f}"),
    ("fail", "failures", "{:>5}"),
)


def curve_row(row: dict) -> dict:
    """A `client_capacity.run_level` row with the curve's own columns added."""
    return {**row, "ttft_over_ms": row["ttft_mean_ms"] - TTFT_MS,
            "ttft_mean_err_ms": abs(row["ttft_mean_ms"] - row["server_ttft_mean_ms"])}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Run every level, print the table (and write --json); return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", default="1,10,100,500,1000", help="comma-separated concurrency levels")
    parser.add_argument("--processes", default="1,2", help="comma-separated llm-locust process counts")
    parser.add_argument("--run-time-s", type=int, default=15, help="length of each level's run, seconds")
    parser.add_argument("--warmup-s", type=float, default=3.0, help="left out at the start of each run, s")
    parser.add_argument("--tokens", type=int, default=128, help="output tokens per request (mean)")
    parser.add_argument("--tokens-spread", type=int, default=32, help="output lengths uniform in tokens ± this")
    parser.add_argument("--json", default="", help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    levels = [int(s) for s in args.streams.split(",")]
    process_counts = [int(p) for p in args.processes.split(",")]
    load = os.getloadavg()[0]
    print(f"simulator: TTFT {TTFT_MS} ms, ITL {ITL_MS} ms, {args.tokens} ± {args.tokens_spread} tokens; "
          f"{args.run_time_s} s per level ({args.warmup_s} s warm-up left out); {os.cpu_count()} cores; "
          f"load average at start {load:.2f}")  # fmt: skip
    print(client_capacity.header(COLUMNS), flush=True)
    rows = []
    for processes in process_counts:
        pinned = processes == 1 and len(os.sched_getaffinity(0)) >= 2
        level_args = argparse.Namespace(
            ttft_ms=TTFT_MS, itl_ms=ITL_MS, tokens=args.tokens, tokens_spread=args.tokens_spread,
            run_time_s=args.run_time_s, warmup_s=args.warmup_s, processes=processes, prometheus_port=False,
            pki=None, itl_bound_ms=1.0, ttft_bound_ms=2.0,
        )  # fmt: skip
        for streams in levels:
            try:
                row = curve_row(client_capacity.run_level("fast", streams, "http", level_args,
                                                          (0, 1) if pinned else (None, None)))  # fmt: skip
            except client_capacity.LevelFailed as e:
                print(e, flush=True)
                break
            rows.append(row)
            print(client_capacity.plain_row(row, COLUMNS), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"load_average": load, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
