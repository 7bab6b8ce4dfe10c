"""`make demo-engine` (`python -m engine.demo` from the repository): a real model's numbers.

Starts the cached llama.cpp server (engine/build.sh) with SmolLM2-135M on a free 127.0.0.1 port
(one thread, pinned to one core), runs a short concurrency sweep against it with
`locustfiles/sweep.py` (1, 2, 4 users by default, 64 output tokens each, the server's metrics
scraped), prints output tokens/s and TTFT per step, then builds the report.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from engine.server import engine_dir, find_engine, pinning, run_llama_server
from llm_locust.metrics.vocabulary import SUMMARY_FILE
from llm_locust.report.cli import main as report_main

SWEEP_LOCUSTFILE = Path(__file__).resolve().parent.parent / "locustfiles" / "sweep.py"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The demo's options."""
    parser = argparse.ArgumentParser(prog="python -m engine.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--sweep-users", default="1,2,4", help="users per step (default 1,2,4)")
    parser.add_argument("--step-duration-s", type=int, default=20, help="length of each step, seconds (default 20)")
    parser.add_argument("--warmup-s", type=int, default=4, help="start of each step left out, seconds (default 4)")
    parser.add_argument("--max-tokens", type=int, default=64, help="output tokens per request (default 64)")
    parser.add_argument("--prompt-tokens", type=int, default=128, help="prompt tokens per request (default 128)")
    parser.add_argument("--results-dir", default="", help="results folder (default results/demo-engine-<date-time>)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the demo; return the sweep's exit code (2 when the engine is not built), or the report's."""
    args = parse_args(argv)
    engine = find_engine()
    if engine is None:
        print(f"engine demo: no llama.cpp engine cached in {engine_dir()}: run `make engine` first", file=sys.stderr)
        return 2
    results = Path(args.results_dir or f"results/demo-engine-{time.strftime('%Y%m%d-%H%M%S')}")
    with run_llama_server(engine, results / "llama-server.log") as server:
        pinned = f", pinned: {' '.join(prefix)}" if (prefix := pinning()) else ""
        print(f"llama-server: {server.url} ({engine.model.name}, 1 thread, 8 slots{pinned})", flush=True)
        command = [
            sys.executable, "-m", "locust", "-f", str(SWEEP_LOCUSTFILE), "--headless", "--only-summary",
            "--host", server.url, "--model", engine.alias, "--sweep-users", args.sweep_users,
            "--step-duration-s", str(args.step_duration_s), "--warmup-s", str(args.warmup_s),
            "--max-tokens", str(args.max_tokens), "--ignore-eos", "--server-family", "llamacpp",
            "--prompt-tokens", str(args.prompt_tokens), "--tokenizer", str(engine.tokenizer),
            "--metrics-url", f"{server.url}/metrics", "--metrics-interval-s", "1",
            "--results-dir", str(results), "--csv", str(results / "locust"),
        ]  # fmt: skip
        print("$ " + " ".join(command[2:]).replace(str(SWEEP_LOCUSTFILE), "locustfiles/sweep.py"), flush=True)
        code = subprocess.call(command)
    summary_path = results / SUMMARY_FILE
    if not summary_path.exists():
        return code or 1
    print("\n" + steps_table(json.loads(summary_path.read_text())))
    print(f"\nResults folder: {results.resolve()}\n$ llm-locust report {results}", flush=True)
    return max(code, report_main([str(results)]))


def steps_table(summary: dict) -> str:
    """One line per sweep step: users, requests, output tokens/s, TTFT p50/p90 ms, TPOT p50 ms."""
    lines = [
        f"{'users':>5} {'requests':>9} {'output tok/s':>13} {'TTFT p50 ms':>12} {'TTFT p90 ms':>12} {'TPOT p50 ms':>12}"
    ]
    for step in summary["steps"]:
        ttft, tpot, done = step["metrics"]["ttft_ms"], step["metrics"]["tpot_ms"], step["throughput"]
        lines.append(
            f"{step['users']:>5} {done['requests_ok']:>9} {done['output_tokens_per_s']:>13.1f} "
            f"{_ms(ttft['p50']):>12} {_ms(ttft['p90']):>12} {_ms(tpot['p50']):>12}"
        )
    return "\n".join(lines)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


if __name__ == "__main__":
    sys.exit(main())
