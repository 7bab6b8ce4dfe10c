"""The `llm-locust` console script: `sim` (the built-in simulator) and `demo`."""

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
    from llm_locust.sim.cli import add_parser as add_sim_parser

    add_sim_parser(commands)
    add_demo_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
