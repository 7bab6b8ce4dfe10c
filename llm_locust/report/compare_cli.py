"""`llm-locust compare BASELINE... -- CANDIDATE... [--max-regression METRIC=N%,...]`: exit 0 when the gate passes,
3 when a metric regressed beyond its limit, 2 on bad input (one line naming it)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from llm_locust.errors import ConfigError

USAGE = "llm-locust compare BASELINE [BASELINE ...] -- CANDIDATE [CANDIDATE ...] [options]"
DESCRIPTION = (
    "Compare two sets of results folders (repeated runs per side): per metric the change from baseline to "
    "candidate with a bootstrap interval, and a verdict: regression, improvement or no significant change. "
    "Exit code 3 when a metric regressed beyond its --max-regression limit (without limits: any regression)."
)
GATE_FAILED = 3


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `compare` sub-command."""
    parser = commands.add_parser(
        "compare",
        help="Baseline vs candidate results folders: changes with bootstrap intervals, verdicts, exit 3 on regression",
        description=DESCRIPTION,
        usage=USAGE,
    )
    return add_arguments(parser)


def split_sides(argv: list[str]) -> list[str]:
    """`argv` of the console script (`compare ...`) with its first `--` (which argparse would swallow) turned into
    `--candidate`, so that the folders after it are the candidate side; other commands' `argv` as it is."""
    if not argv or argv[0] != "compare" or "--" not in argv or "--candidate" in argv:
        return argv
    at = argv.index("--")
    return [*argv[:at], "--candidate", *argv[at + 1 :]]


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The compare arguments and options on `parser`; return it."""
    parser.add_argument("baseline", nargs="+", type=Path, metavar="BASELINE", help="baseline results folder(s)")
    parser.add_argument(
        "--candidate", nargs="+", type=Path, default=[], metavar="CANDIDATE",
        help="candidate results folder(s); `--` before them means the same",
    )  # fmt: skip
    add_verdict_options(parser)
    parser.add_argument(
        "-o", "--output", type=Path, default=Path("compare.html"), help="HTML page of the comparison (compare.html)"
    )
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="also write the comparison as JSON")
    parser.set_defaults(run=run)
    return parser


def add_verdict_options(parser: argparse.ArgumentParser) -> None:
    """The options of the verdicts and the gate, shared by `compare` and `history`: --max-regression,
    --min-change, --confidence, --resamples, --seed (checked by `verdict_limits`)."""
    parser.add_argument(
        "--max-regression", action="append", default=[], metavar="METRIC=N%",
        help="gate: fail (exit 3) when METRIC is worse by more than N %% with the interval's confidence; "
        "repeatable or comma-separated, e.g. ttft_p99_ms=10%%,output_tokens_per_s=5%%; without it every "
        "regression fails. Metrics: {ttft,tpot,itl,e2e}_{p50,p90,p99}_ms, output_tokens_per_s, requests_per_s, "
        "accuracy (N: percentage points)",
    )  # fmt: skip
    parser.add_argument(
        "--min-change", type=float, default=5.0, metavar="PERCENT",
        help="changes whose interval reaches inside ±PERCENT count as no significant change (default 5)",
    )  # fmt: skip
    parser.add_argument("--confidence", type=float, default=0.95, help="confidence of the intervals (default 0.95)")
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap: same inputs, same intervals")


def verdict_limits(args: argparse.Namespace) -> dict[str, float]:
    """The gate's limits of `--max-regression` (metric -> tolerated worsening, a fraction), after checking
    --resamples (`compare.compare` checks --confidence and --min-change); ConfigError naming the first bad one."""
    from llm_locust.report.compare import parse_limits

    if args.resamples < 100:
        raise ConfigError(f"--resamples must be at least 100, got {args.resamples}")
    return parse_limits(args.max_regression)


def run(args: argparse.Namespace) -> int:
    """Compare, print the table and where the page is; return the exit code (0, 2 or 3)."""
    try:
        return _run(args)
    except ConfigError as e:
        print(f"llm-locust compare: {e}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    from llm_locust.report.compare import compare
    from llm_locust.report.compare_page import write_compare_page
    from llm_locust.report.compare_result import console_table
    from llm_locust.report.run_data import load_run

    if not args.candidate:
        raise ConfigError("no candidate folder: write BASELINE... -- CANDIDATE...")
    if args.output.is_dir():
        raise ConfigError(
            f"-o {args.output}: is a folder; give the page's file name, e.g. {args.output / 'compare.html'}"
        )
    limits = verdict_limits(args)
    baseline = [load_run(path) for path in args.baseline]
    candidate = [load_run(path) for path in args.candidate]
    comparison = compare(baseline, candidate, limits, args.confidence, args.min_change / 100, args.resamples, args.seed)
    print(console_table(comparison))
    for line in comparison.notes:
        print(f"Note: {line}")
    page = write_compare_page(comparison, args.output)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_bytes(orjson.dumps(comparison.as_dict(), option=orjson.OPT_INDENT_2))
        print(f"JSON: {args.json.resolve()}")
    print(f"Report: {page.resolve()}")
    return GATE_FAILED if comparison.failed else 0
