"""The results folder of each run, chosen before anything is sent (the decisions are `results.folder`'s).

- The command line (`check_command_line`, on Locust's parser): right after Locust parses it — before `--processes`
  forks the workers, before Locust opens its `--csv` files (which would empty an earlier run's) and before any
  runner starts users — a folder named by `--results-dir` or `--csv` that holds a run, or a results folder that
  cannot be written, ends the process with one line (exit 2). A worker writes nothing: not checked.
- Each test of a master or local runner (`TestFolders.folder_for`): a test started when its folder holds a run (a
  second test from the web UI) writes into the first `<folder>-N` that holds none, said in one line; Locust's `--csv`
  tables, when they are in that folder, go on in the new one.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from llm_locust.results.folder import LOCUST_TABLE_SUFFIX, free_folder, holds_run, named_folder, refusal, write_refusal
from llm_locust.results.settings import DEFAULT_PARENT
from llm_locust.runtime.runner_ops import move_csv_files

logger = logging.getLogger("llm_locust")

_checked: list[bool] = []
"""Whether this process's command line was checked: Locust parses it again for each page of its web UI, by then the
run's own files are in the folder."""


def check_command_line(parser: Any) -> None:
    """Locust's `init_command_line_parser` listener: check the results folder once Locust's main has parsed the
    process's command line (its first parse of `sys.argv`); a bad one ends the process with one line, exit code 2."""
    parse_args = parser.parse_args

    def parse_and_check(args: Any = None, *rest: Any, **kwargs: Any) -> Any:
        options = parse_args(args, *rest, **kwargs)
        if args is None and not _checked:
            _checked.append(True)
            _refuse(options)
        return options

    parser.parse_args = parse_and_check


def _refuse(options: Any) -> None:
    """Exit 2 with one line when `options` (a master's or a local runner's) name a results folder that holds a run,
    or that cannot be written."""
    if getattr(options, "worker", False):
        return
    named = named_folder(getattr(options, "results_dir", ""), getattr(options, "csv_prefix", None))
    # the default folder (results/<date-time>) is new by its name: the folder holding it must be writable
    error = refusal(*named) if named is not None else write_refusal("--results-dir (default)", Path(DEFAULT_PARENT))
    if error is not None:  # Locust sets up its logging only after parsing: the line goes to stderr
        sys.stderr.write(f"{error}\n")
        sys.exit(2)


class TestFolders:
    """Master/local: the folder each test writes into; Locust's `--csv` tables follow a test moved to a new folder."""

    def __init__(self, csv_prefix: str | None) -> None:
        self.csv_prefix = csv_prefix  # given at start-up: where Locust's writer opened its files
        self._moved: tuple[Path, Path] | None = None  # the tables' folder at start-up, and where they are now

    def folder_for(self, environment: Any, requested: Path) -> Path:
        """`requested` when it holds no run, else the first `<requested>-N` that holds none (said in one line); with
        Locust's tables in `requested`, they go on in the new folder too (`runner_ops.move_csv_files`)."""
        if self._moved is not None and requested == self._moved[1]:  # the folder of --csv, moved by an earlier test
            requested = self._moved[0]
        options = environment.parsed_options
        current = getattr(options, "csv_prefix", None)  # where Locust writes its tables now: its own files there
        own = {f"{Path(current).name}{LOCUST_TABLE_SUFFIX}"} if current else set()
        folder = free_folder(requested, lambda path: holds_run(path, own if _within(current, path) else ()))
        if folder == requested:
            return folder
        logger.info("results folder %s holds an earlier run: this test writes into %s", requested, folder)
        if self.csv_prefix is not None and _within(self.csv_prefix, requested):
            moved = str(folder / Path(self.csv_prefix).name)
            if move_csv_files(environment, moved):
                options.csv_prefix = moved  # summary.json's run.locust_csv_prefix
                self._moved = (requested, folder)
        return folder


def _within(prefix: str | None, folder: Path) -> bool:
    """True when Locust's `--csv` tables at `prefix` are in `folder`."""
    return prefix is not None and Path(prefix).parent.resolve() == folder.resolve()
