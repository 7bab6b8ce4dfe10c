"""`llm-locust history DIR [DIR ...] [--baseline-runs K] [--max-regression METRIC=N%,...]`: exit 0 when the newest
run passes the gate, 3 when it regressed beyond a limit or could not be judged, 2 on bad input (one line naming it)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from llm_locust.errors import ConfigError
from llm_locust.report.compare_cli import GATE_FAILED, add_verdict_options, verdict_limits

USAGE = "llm-locust history DIR [DIR ...] [options]"
DESCRIPTION = (
    "The trend of a series of runs (nightly soaks): one offline HTML page with each key metric over the runs and "
    "a table of runs, every run judged against the runs before it (its rolling baseline of --baseline-runs runs) "
    "with compare's bootstrap: regression, improvement or no significant change. DIR is a results folder, a folder "
    "of results folders, or a glob. Incomplete or unreadable runs are listed with why and judged by no one. Exit "
    "code 3 when the newest run regressed beyond its --max-regression limit (without limits: any regression) or "
    "could not be judged."
)


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `history` sub-command."""
    parser = commands.add_parser(
        "history",
        help="A series of runs (nightly soaks): trends, each run against the runs before it, exit 3 on regression",
        description=DESCRIPTION,
        usage=USAGE,
    )
    return add_arguments(parser)


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The history arguments and options on `parser`; return it."""
    from llm_locust.report.history import DEFAULT_BASELINE_RUNS

    parser.add_argument(
        "folders", nargs="+", metavar="DIR",
        help="results folder(s), a folder of results folders (one per run), or a glob such as 'nightly/2026-*'",
    )  # fmt: skip
    parser.add_argument(
        "--baseline-runs", type=int, default=DEFAULT_BASELINE_RUNS, metavar="K",
        help=f"each run is judged against the K runs before it (default {DEFAULT_BASELINE_RUNS})",
    )  # fmt: skip
    add_verdict_options(parser)
    parser.add_argument(
        "-o", "--output", type=Path, default=None,
        help="HTML page (default: DIR/history.html for one folder of runs, else ./history.html)",
    )  # fmt: skip
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="also write the history as JSON")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Judge the runs, print the table and where the page is; return the exit code (0, 2 or 3)."""
    try:
        return _run(args)
    except ConfigError as e:
        print(f"llm-locust history: {e}", file=sys.stderr)
        return 2


def _progress(line: str) -> None:
    print(f"llm-locust history: {line}", file=sys.stderr, flush=True)


def _run(args: argparse.Namespace) -> int:
    from llm_locust.report.history import (
        console_table,
        find_runs,
        is_results_folder,
        judge_history,
        order_runs,
        read_run,
    )
    from llm_locust.report.history_page import write_history_page

    limits = verdict_limits(args)
    output = args.output
    if output is None:
        single = Path(args.folders[0])
        one_series = len(args.folders) == 1 and single.is_dir() and not is_results_folder(single)
        output = single / "history.html" if one_series else Path("history.html")
    if output.is_dir():
        raise ConfigError(f"-o {output}: is a folder; give the page's file name, e.g. {output / 'history.html'}")
    paths = find_runs(args.folders)
    _progress(f"reading {len(paths)} folder(s)")
    runs = order_runs(read_run(path) for path in paths)
    history = judge_history(runs, args.baseline_runs, limits, args.confidence, args.min_change / 100,
                            args.resamples, args.seed, _progress)  # fmt: skip
    print(console_table(history))
    page = write_history_page(history, output)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_bytes(orjson.dumps(history.as_dict(), option=orjson.OPT_INDENT_2))
        print(f"JSON: {args.json.resolve()}")
    print(f"History: {page.resolve()}")
    return GATE_FAILED if history.gate_failed else 0
