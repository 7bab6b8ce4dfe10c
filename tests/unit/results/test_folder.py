"""Which folders hold a run, the new folder of a later test, and the one-line refusals (`results.folder`)."""

from __future__ import annotations

from pathlib import Path

from llm_locust.results.folder import (
    free_folder,
    holds_run,
    in_series,
    named_folder,
    refusal,
    run_files,
    unwritable,
    write_refusal,
)
from llm_locust.results.settings import _default_results_dir


def test_a_folder_holds_a_run_when_it_has_a_file_a_run_writes(tmp_path):
    assert run_files(tmp_path / "missing") == [] and not holds_run(tmp_path / "missing")
    assert not holds_run(tmp_path)  # empty
    (tmp_path / "locust.log").write_text("log")  # a log, a benchmark's rss.csv, a server's log: no run
    (tmp_path / "rss.csv").write_text("t,rss\n")
    assert run_files(tmp_path) == []
    (tmp_path / "llm_timeseries.csv").write_text("time\n")  # a run killed before its first summary.json snapshot
    assert run_files(tmp_path) == ["llm_timeseries.csv"]
    (tmp_path / "plain_stats.csv").write_text("Type\n")  # Locust's own table (any prefix): the report reads it
    (tmp_path / "summary.json").write_text("{}")
    assert run_files(tmp_path) == ["summary.json", "llm_timeseries.csv", "plain_stats.csv"]
    assert holds_run(tmp_path)


def test_a_runs_own_locust_tables_are_not_an_earlier_run(tmp_path):
    (tmp_path / "locust_stats.csv").write_text("")  # Locust opened it before the test started
    assert not holds_run(tmp_path, own={"locust_stats.csv"})
    assert holds_run(tmp_path, own={"other_stats.csv"})
    (tmp_path / "summary.json").write_text("{}")
    assert holds_run(tmp_path, own={"locust_stats.csv"})


def test_a_later_test_gets_the_first_numbered_folder_holding_no_run(tmp_path):
    base = tmp_path / "run"
    assert free_folder(base) == base  # nothing there yet
    taken = {base, tmp_path / "run-2"}
    assert free_folder(base, lambda path: path in taken) == tmp_path / "run-3"
    base.mkdir()
    (base / "summary.json").write_text("{}")
    assert free_folder(base) == tmp_path / "run-2"
    (tmp_path / "run-2").mkdir()  # an empty folder holds no run: it is used
    assert free_folder(base) == tmp_path / "run-2"


def test_the_folder_the_command_line_names(tmp_path):
    assert named_folder("out/x", "elsewhere/locust") == ("--results-dir out/x", Path("out/x"))
    assert named_folder("", "out/y/locust") == ("--csv out/y/locust", Path("out/y"))
    assert named_folder("", "locust") == ("--csv locust", Path("."))
    assert named_folder("", None) is None
    assert _default_results_dir("out/y/locust") == "out/y"  # the settings' default is the same folder
    assert _default_results_dir(None).startswith("results/")


def test_refusals_are_one_line_naming_the_option_the_folder_and_the_fix(tmp_path):
    folder = tmp_path / "run"
    assert refusal("--results-dir run", folder) is None and folder.is_dir()  # created, writable
    assert not list(folder.iterdir())  # the probe file is gone
    for name in ("summary.json", "histograms.json", "llm_timeseries.csv", "requests.jsonl"):
        (folder / name).write_text("x")
    error = refusal("--results-dir run", folder)
    assert error == (
        f"--results-dir run: {folder} already holds a run (summary.json, llm_timeseries.csv, histograms.json, ...); "
        "nothing was sent: give a new folder, or move that run away (a run is never written over another)"
    )
    regular = tmp_path / "a-file"
    regular.write_text("x")
    assert unwritable(regular / "r") == "Not a directory"
    error = write_refusal("--csv f/locust", regular / "r")
    assert error == f"--csv f/locust: cannot write the results into {regular / 'r'} (Not a directory); nothing was " \
        "sent: give a folder you can write"  # fmt: skip
    assert "\n" not in error and refusal("--csv f/locust", regular / "r") == error


def test_a_folders_numbered_series():
    base = Path("/r/run")
    assert in_series(base, base) and in_series(Path("/r/run-2"), base) and in_series(Path("/r/run-17"), base)
    assert not in_series(Path("/r/run-x"), base) and not in_series(Path("/r/runner"), base)
    assert not in_series(Path("/other/run-2"), base) and not in_series(Path("/r/run-2/sub"), base)


def test_the_default_folders_parent_is_judged_without_creating_anything(tmp_path):
    assert unwritable(tmp_path / "results" / "x", create=False) is None and not (tmp_path / "results").exists()
    regular = tmp_path / "a-file"
    regular.write_text("x")
    assert unwritable(regular / "results", create=False) == "Not a directory"
    assert write_refusal("--results-dir (default)", regular / "results", create=False) is not None


def test_a_name_taken_by_a_file_is_skipped(tmp_path):
    """No folder can be made where a regular file (or a link to one, or a dangling link) is: the next name."""
    base = tmp_path / "run"
    base.mkdir()
    (base / "summary.json").write_text("{}")
    (tmp_path / "run-2").write_text("a file")
    (tmp_path / "run-3").symlink_to(tmp_path / "nowhere")
    assert free_folder(base) == tmp_path / "run-4"
    assert free_folder(tmp_path / "run-2", lambda path: False) == tmp_path / "run-2-2"
