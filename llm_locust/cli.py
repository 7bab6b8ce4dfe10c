"""The `llm-locust` console script: `sim` (the built-in simulator), `demo`, `report`, `compare`, `history`,
`options`."""

from __future__ import annotations

import argparse
import sys

from llm_locust import __version__


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with one sub-command per tool."""
    parser = argparse.ArgumentParser(prog="llm-locust", description=__doc__)
    parser.add_argument("--version", action="version", version=f"llm-locust {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    from llm_locust.demo import add_parser as add_demo_parser
    from llm_locust.report.cli import add_parser as add_report_parser
    from llm_locust.report.compare_cli import add_parser as add_compare_parser
    from llm_locust.report.history_cli import add_parser as add_history_parser
    from llm_locust.sim.cli import add_parser as add_sim_parser

    add_sim_parser(commands)
    add_demo_parser(commands)
    add_report_parser(commands)
    add_compare_parser(commands)
    add_history_parser(commands)
    options = commands.add_parser(
        "options",
        help="List the options llm-locust adds to `locust` (Locust's own --help is printed before "
        "the locustfile that adds them is loaded)",
    )
    options.set_defaults(run=_print_locust_options)
    return parser


def _print_locust_options(args: argparse.Namespace) -> int:
    """Print the help of the options registered on Locust's parser by llm-locust."""
    import configargparse  # Locust's parser: options may name an environment variable

    from llm_locust.config.options import add_arguments

    parser = configargparse.ArgumentParser(
        prog="locust -f locustfiles/chat.py", add_help=False, add_env_var_help=False, add_config_file_help=False
    )
    add_arguments(parser)
    parser.print_help()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    from llm_locust.report.compare_cli import split_sides

    parser = build_parser()
    args = parser.parse_args(split_sides(sys.argv[1:] if argv is None else list(argv)))
    return int(args.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
