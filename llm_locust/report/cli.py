"""`llm-locust report RESULTS_DIR [RESULTS_DIR ...] [-o report.html] [--slo ...] [--model-params-b ...]`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from llm_locust.errors import ConfigError
from llm_locust.metrics.slo import parse_slos

DESCRIPTION = (
    "Turn one or many results folders into one self-contained HTML report with PNG images of each chart. "
    "Several folders are overlaid on the same axes and compared side by side."
)


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `report` sub-command."""
    parser = commands.add_parser(
        "report",
        help="Turn one or many results folders into one HTML report (plotly, works offline) and PNG charts",
        description=DESCRIPTION,
    )
    return add_arguments(parser)


def main(argv: list[str]) -> int:
    """`llm-locust report ARGV...` from Python (the demo uses it); return the exit code."""
    return run(
        add_arguments(argparse.ArgumentParser(prog="llm-locust report", description=DESCRIPTION)).parse_args(argv)
    )


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The report's arguments and options on `parser`; return it."""
    parser.add_argument("results_dirs", nargs="+", type=Path, metavar="RESULTS_DIR", help="results folder(s)")
    parser.add_argument(
        "-o", "--output", type=Path, default=None,
        help="report file (default: RESULTS_DIR/report.html for one folder, ./report.html for several); "
        "PNGs go to the folder NAME_png beside it",
    )  # fmt: skip
    parser.add_argument(
        "--slo", action="append", default=[], metavar="METRIC_STAT_ms=VALUE",
        help="latency objective, repeatable or comma-separated, e.g. ttft_p90_ms=2000 tpot_p90_ms=50: "
        "each step is checked; the capacity is the highest step meeting all below the first that does not",
    )  # fmt: skip
    parser.add_argument(
        "--max-error-rate", type=float, default=None, metavar="FRACTION",
        help="a step with a larger share of failed requests fails the capacity pick (default: the run's "
        "--max-error-rate, else 0.01)",
    )  # fmt: skip
    parser.add_argument(
        "--grid-metric", default="ttft_ms_p90", metavar="COLUMN",
        help="metric of a length grid's heat map, a step column: ttft_ms_p90 (default), e2e_ms_p50, "
        "output_tokens_per_s, ...",
    )  # fmt: skip
    parser.add_argument("--no-png", action="store_true", help="skip the PNG images (no browser needed)")
    mbu = parser.add_argument_group("memory bandwidth utilisation (all three to enable)")
    mbu.add_argument("--model-params-b", type=float, help="model parameters, billions (e.g. 8 for an 8B model)")
    mbu.add_argument("--bytes-per-param", type=float, help="bytes per weight: 2 fp16/bf16, 1 fp8/int8, 0.5 int4")
    mbu.add_argument("--peak-bandwidth-gbs", type=float, help="peak memory bandwidth of the replica, GB/s")
    mbu.add_argument("--kv-cache-gb", type=float, default=0.0, help="KV-cache GB read per decode step (default 0)")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Build the report; print where it is. Exit code 2 with one line on a user error."""
    try:
        return _run(args)
    except ConfigError as e:
        print(f"llm-locust report: {e}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    from llm_locust.load.search import search_line
    from llm_locust.report.build import build_report
    from llm_locust.report.mbu import Hardware

    slos = parse_slos(args.slo)
    given = [args.model_params_b, args.bytes_per_param, args.peak_bandwidth_gbs]
    hardware = None
    if any(v is not None for v in given):
        if not all(v is not None for v in given):
            raise ConfigError("MBU needs all of --model-params-b, --bytes-per-param and --peak-bandwidth-gbs")
        hardware = Hardware(args.model_params_b, args.bytes_per_param, args.peak_bandwidth_gbs, args.kv_cache_gb)
    if args.max_error_rate is not None and not 0 <= args.max_error_rate <= 1:
        raise ConfigError(f"--max-error-rate must be a fraction in [0, 1], e.g. 0.01, got {args.max_error_rate:g}")
    report = build_report(
        args.results_dirs,
        args.output,
        slos,
        hardware,
        png=not args.no_png,
        max_error_rate=args.max_error_rate,
        grid_metric=args.grid_metric,
    )
    for cap in report.capacities:
        best = cap.best
        print(f"{cap.run}: " + (f"capacity {best.label}, {best.output_tokens_per_s:.1f} output tok/s" if best
                                else "no step meets every SLO"))  # fmt: skip
    for run in report.runs:
        search = (run.summary or {}).get("search")
        if search:
            print(f"{run.name}: {search_line(search)}")
    if report.png_paths:
        print(f"Charts (PNG): {report.png_paths[0].parent.resolve()} ({len(report.png_paths)} files)")
    if report.png_skipped:
        print(f"PNG images skipped: {report.png_skipped}")
    print(f"Report: {report.html_path.resolve()}")
    return 0
