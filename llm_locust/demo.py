"""`llm-locust demo`: the built-in simulator, a Locust master with 2 worker processes, results.

Starts `llm-locust sim` (continuous-batching timing) on a free 127.0.0.1 port, runs
`locust -f locustfiles/chat.py --headless --processes 2` against it for a short, bounded
time, prints the LLM summary table and where the results folder is, then builds the folder's
report (`llm-locust report`) and prints where it is.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

from llm_locust.metrics.vocabulary import SUMMARY_FILE
from llm_locust.report.cli import main as report_main
from llm_locust.results.files import summary_table

LOCUSTFILE = Path(__file__).resolve().parent.parent / "locustfiles" / "chat.py"
SIM_ARGS = ("--timing", "batching", "--max-batch", "16", "--decode-step-ms", "8", "--decode-step-ms-per-seq", "0.5")


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `demo` sub-command."""
    parser = commands.add_parser("demo", help="Run a short distributed load against the built-in simulator")
    parser.add_argument("--users", type=int, default=24, help="Concurrent users (streams), default 24")
    parser.add_argument("--run-time-s", type=int, default=20, help="Length of the load, seconds (default 20)")
    parser.add_argument("--processes", type=int, default=2, help="Locust worker processes (default 2)")
    parser.add_argument("--results-dir", default="", help="Results folder (default results/demo-<date-time>)")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run the demo; return locust's exit code."""
    from llm_locust.sim import run_sim

    if not LOCUSTFILE.exists():
        print(f"llm-locust demo: {LOCUSTFILE} not found (run the demo from a clone of the repository)")
        return 2
    results_dir = Path(args.results_dir or f"results/demo-{time.strftime('%Y%m%d-%H%M%S')}")
    master_port = free_port()  # not Locust's 5557: another run on this machine may hold it
    with run_sim(*SIM_ARGS) as sim:
        print(f"simulator: {sim.url} ({' '.join(SIM_ARGS)})", flush=True)
        command = [
            sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--only-summary",
            "--processes", str(args.processes), "-u", str(args.users), "-r", str(args.users),
            "--run-time", f"{args.run_time_s}s", "--host", sim.url,
            "--max-tokens", "64", "--prompt-tokens", "256", "--ignore-eos", "--interval-s", "2",
            "--csv", str(results_dir / "locust"), "--csv-full-history", "--results-dir", str(results_dir),
            "--master-bind-host", "127.0.0.1",
            "--master-bind-port", str(master_port), "--master-port", str(master_port),
        ]  # fmt: skip
        shown = command[2 : command.index("--master-bind-host")]
        print("$ " + " ".join(shown).replace(str(LOCUSTFILE), "locustfiles/chat.py"), flush=True)
        code = subprocess.call(command)
    summary_path = results_dir / SUMMARY_FILE
    if summary_path.exists():  # again after Locust's own tables, so it is what the user sees last
        print("\n" + summary_table(json.loads(summary_path.read_text())))
    print(f"\nResults folder: {results_dir.resolve()}")
    for path in sorted(results_dir.glob("*")):
        print(f"  {path.name}")
    if summary_path.exists():
        print(f"\n$ llm-locust report {results_dir}", flush=True)
        code = max(code, report_main([str(results_dir)]))
    return code


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
