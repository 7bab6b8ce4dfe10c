"""`llm-locust demo`: a short concurrency sweep against the built-in simulator, its steps, capacity and curve.

Starts `llm-locust sim` (continuous-batching timing) on a free 127.0.0.1 port, runs
`locust -f locustfiles/sweep.py --headless --processes 2 --sweep-users 1,2,4,8,16,32` against it (a few seconds
a step), then builds the folder's report (`llm-locust report`) under the demo's SLO and prints the steps table, the
capacity line and where the report is. The report opens on the latency-against-throughput curve with the knee and
the capacity marked.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from llm_locust.errors import ConfigError
from llm_locust.metrics.slo import parse_slos
from llm_locust.metrics.vocabulary import SUMMARY_FILE
from llm_locust.report.capacity import Capacity, knee_index

LOCUSTFILE = Path(__file__).resolve().parent.parent / "locustfiles" / "sweep.py"
SIM_ARGS = ("--timing", "batching", "--max-batch", "16", "--decode-step-ms", "8", "--decode-step-ms-per-seq", "0.5")
SWEEP_USERS = "1,2,4,8,16,32"
STEP_S = 6
WARMUP_S = 1
SLO = "ttft_p99_ms=500,tpot_p99_ms=15"
"""The demo's objectives: the first token within half a second, 15 ms a token at most (p99)."""


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `demo` sub-command."""
    parser = commands.add_parser("demo", help="Run a short concurrency sweep against the built-in simulator")
    parser.add_argument("--sweep-users", default=SWEEP_USERS, help=f"users of each step (default {SWEEP_USERS})")
    parser.add_argument("--step-duration-s", type=int, default=STEP_S, help=f"seconds per step (default {STEP_S})")
    parser.add_argument("--processes", type=int, default=2, help="Locust worker processes (default 2)")
    parser.add_argument("--slo", default=SLO, help=f"objectives of the capacity pick (default {SLO})")
    parser.add_argument("--results-dir", default="", help="Results folder (default results/demo-<date-time>)")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run the demo; return locust's exit code (2 for bad options)."""
    from llm_locust.report.build import build_report
    from llm_locust.sim import run_sim

    if not LOCUSTFILE.exists():
        print(f"llm-locust demo: {LOCUSTFILE} not found (run the demo from a clone of the repository)")
        return 2
    try:
        slos = parse_slos([args.slo])
    except ConfigError as e:
        print(f"llm-locust demo: {e}", file=sys.stderr)
        return 2
    results_dir = Path(args.results_dir or f"results/demo-{time.strftime('%Y%m%d-%H%M%S')}")
    with run_sim(*SIM_ARGS) as sim:
        print(f"simulator: {sim.url} ({' '.join(SIM_ARGS)})", flush=True)
        # --processes: the master and its workers meet on a free port of 127.0.0.1, with a secret of their own
        command = [
            sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--only-summary",
            "--processes", str(args.processes), "--host", sim.url, "--sweep-users", args.sweep_users,
            "--step-duration-s", str(args.step_duration_s), "--warmup-s", str(WARMUP_S),
            "--max-tokens", "16", "--prompt-tokens", "128", "--ignore-eos", "--interval-s", "1",
            "--csv", str(results_dir / "locust"), "--csv-full-history", "--results-dir", str(results_dir),
        ]  # fmt: skip
        print("$ " + " ".join(command[2:]).replace(str(LOCUSTFILE), "locustfiles/sweep.py"), flush=True)
        code = subprocess.call(command)
    print(f"\nResults folder: {results_dir.resolve()}")
    for path in sorted(results_dir.glob("*")):
        print(f"  {path.name}")
    if not (results_dir / SUMMARY_FILE).exists():
        return code or 1
    print(f"\n$ llm-locust report {results_dir} --slo {args.slo}", flush=True)
    report = build_report([results_dir], slos=slos)
    print("\n" + steps_table(report.rows, report.capacities))
    print(capacity_line(report.rows, report.capacities, args.slo))
    if report.png_paths:
        print(f"Charts (PNG): {report.png_paths[0].parent.resolve()} ({len(report.png_paths)} files)")
    if report.png_skipped:
        print(f"PNG images skipped: {report.png_skipped}")
    print(f"Report: {report.html_path.resolve()}")
    return code


def steps_table(rows: pd.DataFrame, capacities: list[Capacity]) -> str:
    """One console line per step: users, throughput, latency percentiles (ms), failures, and whether it met the
    SLOs."""
    checks = {check.step: check for cap in capacities for check in cap.checks}
    lines = [f"{'users':>5} {'req/s':>7} {'out tok/s':>10} {'TTFT p50':>9} {'TTFT p99':>9} {'TPOT p50':>9} "
             f"{'TPOT p99':>9} {'E2E p50':>9} {'failed':>7}  SLOs"]  # fmt: skip
    for row in rows.itertuples():
        check = checks.get(row.step)
        verdict = "" if check is None else "met" if check.ok else "missed"
        lines.append(
            f"{row.users:>5} {row.achieved_rate_per_s:>7.2f} {row.output_tokens_per_s:>10.1f} {row.ttft_ms_p50:>9.1f} "
            f"{row.ttft_ms_p99:>9.1f} {row.tpot_ms_p50:>9.2f} {row.tpot_ms_p99:>9.2f} {row.e2e_ms_p50:>9.1f} "
            f"{row.failures:>7}  {verdict}"
        )
    return "\n".join(lines)


def capacity_line(rows: pd.DataFrame, capacities: list[Capacity], slo: str) -> str:
    """The capacity under `slo` (the highest step meeting it below the first that does not) and the knee."""
    knee = knee_index(rows["output_tokens_per_s"].tolist(), rows["e2e_ms_p50"].tolist())
    knee_text = "" if knee is None else f"; knee of the curve: {rows.iloc[knee]['label']}"
    best = capacities[0].best if capacities else None
    if best is None:
        return f"Capacity under {slo}: no step meets every SLO{knee_text}"
    return f"Capacity under {slo}: {best.label}, {best.output_tokens_per_s:,.1f} output tok/s{knee_text}"
