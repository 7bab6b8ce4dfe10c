"""`llm-locust history`: each run of a series (nightly soaks) judged against the runs before it.

The runs are results folders, ordered by their start time (summary.json's `run.start_time`; a folder without a
readable summary by its modification time, then by name). A run is *left out* — listed with why, never judged nor
used as a baseline — when its folder cannot be read, it has no summary.json (a plain Locust run), its summary says
"incomplete" (interrupted, a worker lost), or it has fewer whole time windows than compare needs
(`compare.whole_windows`). Every other run is judged against its *rolling baseline*, the previous `baseline_runs`
runs that were not left out and have the same sweep steps, by `compare.compare`: the same two-level bootstrap,
verdicts and gate, the baseline's runs as repeated runs of one side. A run's verdict is a regression when any
metric regressed, else an improvement when any improved, else no significant change; "no baseline" when no earlier
run qualifies.

The gate concerns the newest run only: it fails (exit code 3) when that run fails compare's gate against its
baseline (`--max-regression` limits; without them, any regression), or when it was left out — a night that
produced nothing to judge is not a pass. A newest run without a baseline (the first night) passes.

Pure: reads results folders (`run_data`), imports no Locust.
"""

from __future__ import annotations

import datetime as dt
import glob
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_locust.errors import ConfigError
from llm_locust.metrics.vocabulary import SUMMARY_FILE
from llm_locust.report.compare import compare, run_steps, whole_windows
from llm_locust.report.compare_result import IMPROVEMENT, NO_CHANGE, REGRESSION, Comparison, gate_line
from llm_locust.report.run_data import RunData, load_run

NO_BASELINE, LEFT_OUT = "no baseline", "left out"
DEFAULT_BASELINE_RUNS = 5

EFFICIENCY: tuple[tuple[str, str, str], ...] = (
    ("energy", "joules_per_output_token", "J per output token"),
    ("energy", "joules_per_request", "J per request"),
    ("energy", "mean_power_w", "mean power, W"),
    ("cost", "usd_per_million_output_tokens", "USD per million output tokens"),
    ("cost", "usd_per_million_input_tokens", "USD per million input tokens"),
    ("cost", "usd_per_hour", "USD per hour"),
)
"""summary.json's energy and cost figures (group, key, label with unit), shown when a run has them."""


@dataclass(frozen=True)
class HistoryRun:
    """One folder of the series: its start (aware datetime), the run's data (None when unreadable), and why it is
    left out ("" when it is judged)."""

    path: Path
    started: dt.datetime
    data: RunData | None
    left_out: str = ""

    @property
    def name(self) -> str:
        """The folder's name."""
        return self.path.resolve().name

    @property
    def summary(self) -> dict[str, Any]:
        """The run's summary.json ({} when it has none)."""
        return (self.data.summary if self.data is not None else None) or {}


@dataclass(frozen=True)
class Judgement:
    """A run and what the history says of it: its baseline runs and compare's result against them (None when the
    run is left out or has no baseline)."""

    run: HistoryRun
    baseline: tuple[HistoryRun, ...]
    comparison: Comparison | None

    @property
    def verdict(self) -> str:
        """left out, no baseline, or `run_verdict` of every metric's verdict."""
        if self.run.left_out:
            return LEFT_OUT
        if self.comparison is None:
            return NO_BASELINE
        return run_verdict(r.verdict for r in self.comparison.results)

    def metric_verdict(self, metric: str) -> str | None:
        """The verdict of one compared metric (`compare_result.METRICS` name) over its scopes (`run_verdict`), None when
        the run was not compared."""
        if self.comparison is None:
            return None
        return run_verdict(r.verdict for r in self.comparison.results if r.metric.name == metric)

    def changes(self, verdict: str) -> list[str]:
        """The metrics with `verdict` as "name +12.3 %" (accuracy: "accuracy -10.0 pt"; the sweep step's label
        first in sweeps)."""
        if self.comparison is None:
            return []
        return [
            f"{'' if r.scope == 'run' else f'{r.scope}: '}{r.metric.name} {100 * r.change:+.1f}{r.metric.unit}"
            for r in self.comparison.results
            if r.verdict == verdict and r.change is not None
        ]


@dataclass(frozen=True)
class History:
    """Every run of the series in start order, judged; the settings the verdicts used."""

    judgements: tuple[Judgement, ...]
    baseline_runs: int
    limits: dict[str, float]

    @property
    def newest(self) -> Judgement:
        """The newest run's judgement."""
        return self.judgements[-1]

    @property
    def gate_failed(self) -> bool:
        """True when the newest run failed the gate or could not be judged (module docstring)."""
        newest = self.newest
        return bool(newest.run.left_out) or (newest.comparison is not None and bool(newest.comparison.failed))

    def gate_line(self) -> str:
        """One line: the gate's verdict on the newest run."""
        newest = self.newest
        if newest.run.left_out:
            return f"History: FAILED: the newest run {newest.run.name} could not be judged: {newest.run.left_out}"
        if newest.comparison is None:
            return f"History: PASSED (the newest run {newest.run.name} has no earlier run to be compared with)"
        return gate_line(newest.comparison, self.gate_name)

    @property
    def gate_name(self) -> str:
        """How the gate's line names the judgement of the newest run: "History (NAME against the K run(s) before
        it)"."""
        newest = self.newest
        return f"History ({newest.run.name} against the {len(newest.baseline)} run(s) before it)"

    def as_dict(self) -> dict[str, Any]:
        """The history as written by `--json`: each run with its verdict and compare's results (changes in %)."""
        return {
            "baseline_runs": self.baseline_runs,
            "limits_pct": {name: round(100 * value, 3) for name, value in self.limits.items()},
            "passed": not self.gate_failed,
            "gate": self.gate_line(),
            "runs": [
                {
                    "folder": str(j.run.path),
                    "start_time": j.run.started.isoformat(),
                    "verdict": j.verdict,
                    "left_out": j.run.left_out or None,
                    "baseline": [str(run.path) for run in j.baseline],
                    "results": [] if j.comparison is None else [r.as_dict() for r in j.comparison.results],
                    "notes": [] if j.comparison is None else j.comparison.notes,
                }
                for j in self.judgements
            ],
        }


def run_verdict(verdicts: Iterable[str]) -> str:
    """One verdict of many: regression when any is, else improvement when any is, else no significant change
    (metrics without data do not count)."""
    seen = set(verdicts)
    if REGRESSION in seen:
        return REGRESSION
    if IMPROVEMENT in seen:
        return IMPROVEMENT
    return NO_CHANGE


def rolling_baselines(keys: Sequence[Hashable | None], count: int) -> list[list[int]]:
    """For the runs in start order, given each run's comparability key (None: left out), the indices of each
    run's baseline: the last `count` earlier runs with the same key (oldest first); [] for a left-out run."""
    baselines: list[list[int]] = []
    for index, key in enumerate(keys):
        if key is None:
            baselines.append([])
            continue
        earlier = [i for i in range(index) if keys[i] == key]
        baselines.append(earlier[-count:])
    return baselines


def is_results_folder(path: Path) -> bool:
    """True when `path` holds what a run writes: summary.json or Locust's *_stats.csv."""
    return (path / SUMMARY_FILE).exists() or any(path.glob("*_stats.csv"))


def find_runs(arguments: Sequence[str]) -> list[Path]:
    """The results folders named by `arguments`, each once: a glob pattern (expanded here, for schedulers that pass
    it as it is) names runs, each matching folder one; a folder names itself when it is a results folder
    (`is_results_folder`), else it is a folder of runs, each of its sub-folders but hidden ones one — results or not:
    a night that wrote nothing is listed too. ConfigError naming an argument that names no run."""
    found: dict[Path, None] = {}
    for argument in arguments:
        if glob.has_magic(argument):
            matches = sorted(Path(p) for p in glob.glob(argument) if Path(p).is_dir())
            if not matches:
                raise ConfigError(f"{argument}: matches no folder")
            found.update(dict.fromkeys(matches))
            continue
        folder = Path(argument)
        if not folder.is_dir():
            raise ConfigError(f"{argument}: no such folder (give results folders, a folder of them, or a glob)")
        if is_results_folder(folder):
            found[folder] = None
            continue
        children = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
        if not children:
            raise ConfigError(f"{folder}: neither a results folder nor a folder of results folders")
        found.update(dict.fromkeys(children))
    return list(found)


def read_run(path: Path) -> HistoryRun:
    """The run of the folder `path`, left out (with the reason) when it cannot be judged; never raises for a bad
    folder."""
    try:
        data = load_run(path)
    except ConfigError as e:
        return HistoryRun(path, _folder_time(path), None, str(e))
    summary = data.summary
    if summary is None:
        return HistoryRun(path, _folder_time(path), data, f"no {SUMMARY_FILE}: a plain Locust run, nothing to judge")
    started = _start_time(summary) or _folder_time(path)
    if summary.get("status") != "complete":
        meta = summary.get("run") or {}
        why = meta.get("interrupted") or (meta.get("workers_lost") and "a worker was lost") or "the run did not finish"
        return HistoryRun(path, started, data, f"incomplete run ({why})")
    try:
        whole_windows(data)
    except ConfigError as e:
        return HistoryRun(path, started, data, str(e))
    return HistoryRun(path, started, data)


def order_runs(runs: Iterable[HistoryRun]) -> list[HistoryRun]:
    """`runs` in start order (ties by folder name)."""
    return sorted(runs, key=lambda run: (run.started, run.name))


def judge_history(
    runs: Sequence[HistoryRun],
    baseline_runs: int = DEFAULT_BASELINE_RUNS,
    limits: dict[str, float] | None = None,
    confidence: float = 0.95,
    min_change: float = 0.05,
    resamples: int = 2000,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> History:
    """Judge every run of `runs` (in start order, `order_runs`) against its rolling baseline (module docstring);
    `progress` gets one line per run. ConfigError when there is no run or `baseline_runs` < 1."""
    if not runs:
        raise ConfigError("history: no results folder found")
    if baseline_runs < 1:
        raise ConfigError(f"--baseline-runs must be at least 1, got {baseline_runs}")
    limits = limits or {}
    keys = [None if run.left_out or run.data is None else run_steps(run.data) for run in runs]
    judgements = []
    for index, (run, baseline) in enumerate(zip(runs, rolling_baselines(keys, baseline_runs), strict=True)):
        comparison = None
        if baseline and run.data is not None:
            comparison = compare([runs[i].data for i in baseline if runs[i].data is not None], [run.data], limits,
                                 confidence, min_change, resamples, seed)  # fmt: skip
        judgement = Judgement(run, tuple(runs[i] for i in baseline), comparison)
        judgements.append(judgement)
        if progress is not None:
            why = f": {run.left_out}" if run.left_out else ""
            progress(f"[{index + 1}/{len(runs)}] {run.name}: {judgement.verdict}{why}")
    return History(tuple(judgements), baseline_runs, dict(limits))


def summary_value(summary: dict[str, Any], *keys: str) -> float | None:
    """The number at `keys` in `summary` (e.g. "metrics", "ttft_ms", "p50"), None where a level is absent, null or
    not a number."""
    value: Any = summary
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def console_table(history: History) -> str:
    """A fixed-width table of the runs (start, folder, verdict, what changed) and the gate's line."""
    lines = [f"{'start':<26}{'run':<28}{'baseline':>9}  {'verdict':<22}changes"]
    for j in history.judgements:
        changes = "; ".join(j.changes(REGRESSION) + j.changes(IMPROVEMENT)) or j.run.left_out
        lines.append(f"{j.run.started.isoformat():<26}{j.run.name:<28}{len(j.baseline):>9}  {j.verdict:<22}{changes}")
    lines.append(history.gate_line())
    return "\n".join(lines)


def _start_time(summary: dict[str, Any]) -> dt.datetime | None:
    """summary.json's run.start_time as an aware datetime, None when absent or unreadable."""
    text = (summary.get("run") or {}).get("start_time")
    try:
        started = dt.datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return started if started.tzinfo is not None else started.astimezone()


def _folder_time(path: Path) -> dt.datetime:
    """The folder's modification time (aware, local, whole seconds as summary.json's), the date of a run without a
    readable start time."""
    try:
        return dt.datetime.fromtimestamp(int(path.stat().st_mtime)).astimezone()
    except OSError:
        return dt.datetime.fromtimestamp(0).astimezone()
