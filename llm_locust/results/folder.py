"""Whether a results folder already holds a run, which new folder a test writes into, and whether a folder can be
written — decided before anything is sent (docs/results.md "One run per folder").

A run is never written over another: a headless run whose folder holds one is refused at start (exit 2, `refusal`);
a test started from the web UI whose folder holds one (an earlier test, an earlier process) writes into the first
`<folder>-N` that holds none (`free_folder`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Collection
from pathlib import Path

from llm_locust.metrics.vocabulary import (
    HISTOGRAMS_FILE,
    PROCESSES_FILE,
    SERVER_METRICS_FILE,
    SUMMARY_FILE,
    TELEMETRY_FILE,
    TIMESERIES_FILE,
)
from llm_locust.results.request_lines import REQUESTS_FILE
from llm_locust.results.trace_offered import TRACE_OFFERED_FILE

RUN_FILES = (
    SUMMARY_FILE,
    TIMESERIES_FILE,
    HISTOGRAMS_FILE,
    PROCESSES_FILE,
    REQUESTS_FILE,
    SERVER_METRICS_FILE,
    TELEMETRY_FILE,
    TRACE_OFFERED_FILE,
)
"""The files a run writes into its results folder: one of them there means the folder holds a run (a run killed
before its first summary.json snapshot leaves llm_timeseries.csv)."""
LOCUST_TABLE_SUFFIX = "_stats.csv"
"""Locust's own table of a run (`--csv PREFIX`: PREFIX_stats.csv), which the report reads as a run's."""


def run_files(folder: Path) -> list[str]:
    """The names of the files of an earlier run in `folder`: `RUN_FILES` in their order, then Locust's `*_stats.csv`
    sorted; [] when there are none or `folder` is not a folder. Other files (a log, notes) are no run."""
    if not folder.is_dir():
        return []
    tables = sorted(path.name for path in folder.glob(f"*{LOCUST_TABLE_SUFFIX}") if path.is_file())
    return [name for name in RUN_FILES if (folder / name).is_file()] + tables


def holds_run(folder: Path, own: Collection[str] = ()) -> bool:
    """True when `folder` holds a file of an earlier run (`run_files`) besides the files named in `own` (the run's
    own: Locust opens its `--csv` tables before any test starts)."""
    return bool(set(run_files(folder)) - set(own))


def free_folder(folder: Path, taken: Callable[[Path], bool] = holds_run) -> Path:
    """`folder` when it is not `taken`, else the first of `<folder>-2`, `<folder>-3`, ... that is not; a name held by
    anything but a folder (a regular file, a link to one) is taken too: no folder can be made there."""
    candidate, n = folder, 1
    while taken(candidate) or (os.path.lexists(candidate) and not candidate.is_dir()):
        n += 1
        candidate = folder.with_name(f"{folder.name}-{n}")
    return candidate


def in_series(folder: Path, base: Path) -> bool:
    """True when `folder` is `base` or one of its numbered folders `<base>-N` (`free_folder`)."""
    prefix = f"{base.name}-"
    numbered = folder.name.startswith(prefix) and folder.name[len(prefix) :].isdigit()
    return folder == base or (folder.parent == base.parent and numbered)


def unwritable(folder: Path, create: bool = True) -> str | None:
    """Why results cannot be written into `folder` (the system's reason, e.g. "Not a directory"), else None; creates
    `folder` (and its parents) and a probe file in it, removed at once. `create=False`: creates nothing, judges the
    nearest folder that exists (the default folder is made only when a test starts)."""
    if not create:
        existing = next(path for path in (folder, *folder.parents) if path.exists())
        if not existing.is_dir():
            return "Not a directory"
        return None if os.access(existing, os.W_OK | os.X_OK) else "Permission denied"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-check-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        return e.strerror or str(e)
    return None


def refusal(option: str, folder: Path) -> str | None:
    """The one-line error refusing a run whose results folder `folder` (named by command-line `option`, e.g.
    "--results-dir results/x") holds an earlier run or cannot be written, else None (the folder is then created)."""
    earlier = run_files(folder)
    if earlier:
        shown = ", ".join(earlier[:3]) + (", ..." if len(earlier) > 3 else "")
        return (
            f"{option}: {folder} already holds a run ({shown}); nothing was sent: give a new folder, or move that "
            "run away (a run is never written over another)"
        )
    return write_refusal(option, folder)


def write_refusal(option: str, folder: Path, create: bool = True) -> str | None:
    """The one-line error refusing a run whose results cannot be written into `folder` (named by `option`), else None
    (the folder is then created, unless `create` is False: `unwritable`)."""
    reason = unwritable(folder, create)
    if reason is None:
        return None
    return f"{option}: cannot write the results into {folder} ({reason}); nothing was sent: give a folder you can write"


def named_folder(results_dir: str, csv_prefix: str | None) -> tuple[str, Path] | None:
    """The results folder the command line names, with the option naming it (e.g. "--results-dir results/x"):
    `--results-dir`, else the folder of Locust's `--csv` prefix (`settings.OutputSettings`); None when neither is given
    (the default, results/<date-time>, is new by its name)."""
    if results_dir:
        return f"--results-dir {results_dir}", Path(results_dir)
    if csv_prefix:
        return f"--csv {csv_prefix}", Path(os.path.dirname(csv_prefix) or ".")
    return None
