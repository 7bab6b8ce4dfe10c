"""A run is never written over another, nor sent when its results cannot be written (docs/results.md "One run per
folder"): real `locust` processes against the simulator, from the command line and from a real web UI."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path

import pytest
from conftest import LOCUSTFILE, read_summary, run_locust, wait_for
from harness.web_ui import http, locust_web_ui


def fingerprints(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file under `folder`: its SHA-256 and its modification time (ns)."""
    return {
        str(path.relative_to(folder)): (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_the_command_line_refuses_a_folder_holding_a_run_and_sends_nothing(fast_sim, tmp_path):
    run = tmp_path / "run"
    args = ("-u", "2", "-r", "2", "--host", fast_sim.url, "--model", "llm-locust-sim", "--max-tokens", "8",
            "--results-dir", str(run), "--csv", str(run / "locust"), "--csv-full-history",
            "--requests-jsonl")  # fmt: skip
    first = run_locust(LOCUSTFILE, *args, "-t", "2s", timeout_s=60)
    assert first.returncode == 0, first.stderr[-3000:]
    before = fingerprints(run)
    assert {"summary.json", "histograms.json", "requests.jsonl", "locust_stats.csv"} <= set(before)
    sent = len(fast_sim.trace())
    # the same command again; the folder named by --csv alone (the default results folder); --processes 2
    for again in (args, ("-u", "2", "--host", fast_sim.url, "--csv", str(run / "locust")), (*args, "--processes", "2")):
        second = run_locust(LOCUSTFILE, *again, "-t", "2s", timeout_s=60)
        assert second.returncode == 2, second.stderr[-3000:]
        named = f"--results-dir {run}" if "--results-dir" in again else f"--csv {run / 'locust'}"
        assert lines(second.stdout + second.stderr) == [
            f"{named}: {run} already holds a run (summary.json, "
            "llm_timeseries.csv, histograms.json, ...); nothing was sent: give a new folder, or move that run away (a "
            "run is never written over another)"
        ]
    assert len(fast_sim.trace()) == sent  # the simulator saw no request of the refused runs
    assert fingerprints(run) == before  # no file of the first run changed, nor was one added


def test_an_unwritable_results_folder_is_refused_before_any_request(fast_sim, tmp_path):
    regular = tmp_path / "a-file"
    regular.write_text("not a folder")
    sent = len(fast_sim.trace())
    for folder_args in (("--results-dir", str(regular / "r")), ("--csv", str(regular / "r" / "locust"))):
        done = run_locust(LOCUSTFILE, "-u", "2", "-r", "2", "-t", "3s", "--host", fast_sim.url, "--model",
                          "llm-locust-sim", "--processes", "2", *folder_args, timeout_s=60)  # fmt: skip
        assert done.returncode == 2, done.stderr[-3000:]
        (line,) = lines(done.stdout + done.stderr)
        assert line == (
            f"{' '.join(folder_args)}: cannot write the results into {regular / 'r'} (Not a directory); nothing was "
            "sent: give a folder you can write"
        )
    assert len(fast_sim.trace()) == sent  # master and workers sent nothing


@pytest.mark.alone  # a web UI up within 20 s
def test_each_web_ui_test_writes_a_folder_of_its_own_and_leaves_the_earlier_ones_as_they_were(fast_sim, tmp_path):
    """A web UI started on a folder holding a run (a restarted master) comes up; its first test writes into run-2, its
    second into run-3, each with its own Locust tables; no file of an earlier run or test changes."""
    run, tests = tmp_path / "run", (tmp_path / "run-2", tmp_path / "run-3")
    folder_args = ("--results-dir", str(run), "--csv", str(run / "locust"), "--requests-jsonl")
    headless = run_locust(LOCUSTFILE, "-u", "2", "-r", "2", "-t", "2s", "--host", fast_sim.url, "--model",
                          "llm-locust-sim", "--max-tokens", "8", *folder_args, timeout_s=60)  # fmt: skip
    assert headless.returncode == 0, headless.stderr[-3000:]
    prints = fingerprints(run)
    command = ["-f", str(LOCUSTFILE), "--host", fast_sim.url, "--model", "llm-locust-sim", "--max-tokens", "8",
               *folder_args]  # fmt: skip
    with locust_web_ui(*command) as web:
        ui = web.url
        wait_for(lambda: _answers(ui), 20, "the web UI")
        summaries = []
        for folder in tests:
            sent = len(fast_sim.trace())
            assert json.loads(http(f"{ui}/swarm", {"user_count": 2, "spawn_rate": 2, "host": fast_sim.url}))["success"]
            wait_for(lambda: len(fast_sim.trace()) >= sent + 10, 20, "the test's requests")  # noqa: B023
            if folder == tests[1]:  # Locust's tables of the process moved to the second test's folder as it started
                prints |= {f"2/{name}": value for name, value in fingerprints(tests[0]).items() if _locust(name)}
            http(f"{ui}/stop", {})
            summaries.append(wait_for(lambda: _final(folder), 30, f"the final summary in {folder}"))  # noqa: B023
            if folder == tests[0]:  # the first test's own files, as it left them
                prints |= {f"2/{name}": value for name, value in fingerprints(tests[0]).items() if not _locust(name)}
        # while the tests ran and ended, nothing in the earlier run's or the first test's folder changed
        assert fingerprints(run) | {f"2/{name}": value for name, value in fingerprints(tests[0]).items()} == prints
    for folder in tests:
        assert f"results folder {run} holds an earlier run: this test writes into {folder}" in web.output
    assert [s["run"]["locust_csv_prefix"] for s in summaries] == [str(folder / "locust") for folder in tests]
    for folder, summary in zip(tests, summaries, strict=True):  # each folder holds its own test only
        throughput = summary["throughput"]
        with (folder / "locust_stats.csv").open() as f:
            aggregated = next(row for row in f.read().splitlines() if ",Aggregated," in row).split(",")
        assert int(aggregated[2]) == throughput["requests_ok"] + throughput["requests_failed"] > 0
        jsonl = (folder / "requests.jsonl").read_text().splitlines()
        assert len(jsonl) == summary["requests_file"]["lines"] == throughput["requests_ok"]


def test_the_web_ui_starts_no_test_whose_results_folder_it_cannot_make(fast_sim, tmp_path):
    """The next results folder's name taken by a regular file: the test writes into the one after it (before, it
    answered "Swarming started", ran and wrote nothing: FileExistsError in a handler). The folder's parent turned
    into a file: the start is refused in the form's answer with the reason, nothing starts, nothing is sent."""
    base = tmp_path / "out"
    run = base / "run"
    command = ["-f", str(LOCUSTFILE), "--host", fast_sim.url, "--model", "llm-locust-sim", "--max-tokens", "8",
               "--results-dir", str(run)]  # fmt: skip
    form = {"user_count": 2, "spawn_rate": 2, "host": fast_sim.url}
    with locust_web_ui(*command) as web:
        ui = web.url
        wait_for(lambda: _answers(ui), 20, "the web UI")
        (base / "run-2").parent.mkdir(parents=True, exist_ok=True)
        (base / "run-2").write_text("a file, not a folder")
        for folder in (run, base / "run-3"):
            sent = len(fast_sim.trace())
            assert json.loads(http(f"{ui}/swarm", form))["message"] == "Swarming started"
            wait_for(lambda: len(fast_sim.trace()) >= sent + 4, 20, "the test's requests")  # noqa: B023
            http(f"{ui}/stop", {})
            wait_for(lambda: _final(folder), 30, f"the final summary in {folder}")  # noqa: B023
        for path in sorted(base.iterdir(), reverse=True):  # the results' parent is now a regular file
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        base.rmdir()
        base.write_text("a file, not a folder")
        sent = len(fast_sim.trace())
        refused = json.loads(http(f"{ui}/swarm", form))
        state = json.loads(http(f"{ui}/stats/requests"))["state"]
        time.sleep(1)
        after = len(fast_sim.trace())
    assert (tmp_path / "out").read_text() == "a file, not a folder"
    assert refused["success"] is False and refused["message"] == (
        f"--results-dir {run}: cannot write the results into {run} (Not a directory); nothing was sent: give a folder "
        "you can write"
    ), refused
    assert state == "stopped" and after == sent
    assert "FileExistsError" not in web.output and "Traceback" not in web.output, web.output[-3000:]


def _locust(name: str) -> bool:
    """True for Locust's own tables (`--csv`)."""
    return name.startswith("locust_")


def _answers(ui: str) -> bool:
    try:
        return bool(http(f"{ui}/stats/requests"))
    except OSError:
        return False


def _final(folder: Path) -> dict | None:
    """summary.json in `folder` once the test's final one is written."""
    path = folder / "summary.json"
    if not path.exists():
        return None
    summary = read_summary(folder)
    return summary if summary["status"] == "complete" else None
