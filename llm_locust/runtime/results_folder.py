"""The results folder of each run, chosen before anything is sent (the decisions are `results.folder`'s).

- The command line (`check_command_line`, on Locust's parser): right after Locust parses it — before `--processes`
  forks the workers, before Locust opens its `--csv` files (which would empty an earlier run's) and before any
  runner starts users — a results folder that cannot be written ends the process with one line (exit 2), and so does,
  headless, a folder named by `--results-dir` or `--csv` that holds a run. A worker writes nothing: not checked.
- Each test of a master or local runner (`folder_for`): a test started when its folder holds a run (from the web UI:
  an earlier test, or an earlier process — a restarted master pod must come up) or when its name is taken by a file
  writes into the first `<folder>-N` that holds none, said in one line; Locust's `--csv` tables go on in the test's
  folder. The web UI's start refuses a test whose folder cannot be made or written (`start_refusal`, applied by
  `web_guard`): nothing starts.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from llm_locust.results.folder import (
    LOCUST_TABLE_SUFFIX,
    free_folder,
    holds_run,
    in_series,
    named_folder,
    refusal,
    write_refusal,
)
from llm_locust.results.settings import DEFAULT_PARENT, results_dir_of
from llm_locust.runtime.runner_ops import after_first_parse, move_csv_files

logger = logging.getLogger("llm_locust")


def check_command_line(parser: Any) -> None:
    """Locust's `init_command_line_parser` listener: check the results folder once Locust's main has parsed the
    process's command line (its first parse of `sys.argv`); a bad one ends the process with one line, exit code 2."""
    after_first_parse(parser, _refuse)


def _refuse(options: Any) -> None:
    """Exit 2 with one line when `options` (a master's or a local runner's) name a results folder that cannot be
    written, or, headless, one that holds a run. A web UI whose folder holds a run keeps it as the base of its tests'
    folders (`--results-dir`, also when named by `--csv`) and has Locust open its tables in the first new one."""
    if getattr(options, "worker", False):
        return
    csv_prefix = getattr(options, "csv_prefix", None)
    named = named_folder(getattr(options, "results_dir", ""), csv_prefix)
    if named is None:  # the default folder (results/<date-time>) is new by its name: the one holding it is checked
        error = write_refusal("--results-dir (default)", Path(DEFAULT_PARENT), create=False)
    elif getattr(options, "headless", False):
        error = refusal(*named)
    else:
        option, base = named
        options.results_dir = str(base)  # each test's folder is `base` or a `<base>-N` (`folder_for`)
        folder = free_folder(base)
        if csv_prefix is not None and folder != base and _within(csv_prefix, base):
            options.csv_prefix = str(folder / Path(csv_prefix).name)  # not over the earlier run's tables
        error = write_refusal(option, folder)
    if error is not None:  # Locust sets up its logging only after parsing: the line goes to stderr
        sys.stderr.write(f"{error}\n")
        sys.exit(2)


def start_refusal(options: Any) -> str | None:
    """Why a test started now from the web UI could not write its results (the folder it would write into,
    `next_test_folder`, cannot be made or written), in one line; None when it can. Creates nothing."""
    folder = next_test_folder(options, Path(results_dir_of(options)))
    named = named_folder(getattr(options, "results_dir", ""), getattr(options, "csv_prefix", None))
    option = "--results-dir (default)" if named is None else named[0]
    return write_refusal(option, folder, create=False)


def next_test_folder(options: Any, requested: Path) -> Path:
    """The folder a test started now writes into: `requested` when it holds no run (Locust's own tables of this
    process aside) and a folder can be made there, else the first such `<requested>-N` (`folder.free_folder`)."""
    current = getattr(options, "csv_prefix", None)  # where Locust writes its tables now: its own files there
    own = {f"{Path(current).name}{LOCUST_TABLE_SUFFIX}"} if current else set()
    return free_folder(requested, lambda path: holds_run(path, own if _within(current, path) else ()))


def folder_for(environment: Any, requested: Path) -> Path:
    """Master/local, as a test starts: `requested` when it holds no run, else the first `<requested>-N` that holds none
    (said in one line; `next_test_folder`). Locust's `--csv` tables (one set per process) move into that folder when
    they are in another of the series (`runner_ops.move_csv_files`): each folder holds one test's tables."""
    options = environment.parsed_options
    current = getattr(options, "csv_prefix", None)
    folder = next_test_folder(options, requested)
    if folder != requested:
        logger.info("results folder %s holds an earlier run: this test writes into %s", requested, folder)
    if current is not None and not _within(current, folder):
        tables = Path(current).parent.resolve()
        if in_series(tables, requested.resolve()) and move_csv_files(environment, str(folder / Path(current).name)):
            options.csv_prefix = str(folder / Path(current).name)  # summary.json's run.locust_csv_prefix
    return folder


def _within(prefix: str | None, folder: Path) -> bool:
    """True when Locust's `--csv` tables at `prefix` are in `folder`."""
    return prefix is not None and Path(prefix).parent.resolve() == folder.resolve()
