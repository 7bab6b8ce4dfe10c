"""Bad input to the `locust` CLI: one line naming the problem and the fix, a non-zero exit code, no
traceback; and API keys never in any output (console, log file, CSVs, JSON, HTML report)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import LOCUSTFILE, ROOT, free_port, read_summary

from llm_locust.sim import run_sim

KEY = "sk-live-SECRET-a1b2c3d4e5"
WRONG_KEY = "sk-wrong-SECRET-f6e5d4c3"


def run_locust(tmp_path: Path, host: str, *extra: str, env: dict | None = None, logfile: bool = False):
    """A short headless run writing every output Locust can write into `tmp_path`; -> (exit code, console).

    `logfile`: log (at DEBUG level) to locust.log in `tmp_path` instead of the console.
    """
    command = [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "-u", "2", "-r", "2",
        "--run-time", "3s", "--host", host, "--max-tokens", "8", "--results-dir", str(tmp_path),
        "--csv", str(tmp_path / "locust"), "--csv-full-history", "--html", str(tmp_path / "report.html"),
        "--loglevel", "DEBUG", *(("--logfile", str(tmp_path / "locust.log")) if logfile else ()), *extra,
    ]  # fmt: skip
    proc = subprocess.run(
        command, cwd=ROOT, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=60
    )
    return proc.returncode, proc.stdout + proc.stderr


def error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if "/ERROR/" in line]


@pytest.fixture(scope="module")
def keyed_sim():
    """A simulator that wants `KEY` (HTTP 401 otherwise, echoing the key it got, as some providers do)."""
    with run_sim("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "8", "--api-key", KEY) as sim:
        yield sim


@pytest.mark.parametrize(
    ("host", "message"),
    [
        ("ftp://127.0.0.1:8000", "unknown URL scheme 'ftp'"),
        ("127.0.0.1:8000", "has no URL scheme"),
        ("http://", "names no server address"),
    ],
)
def test_bad_host_url(tmp_path, host, message):
    code, output = run_locust(tmp_path, host)
    assert code == 2, output[-2000:]
    errors = error_lines(output)
    assert len(errors) == 1 and message in errors[0] and "--host" in errors[0], output[-2000:]
    assert "Traceback" not in output


@pytest.mark.parametrize("model_given", [True, False])
def test_unreachable_host(tmp_path, model_given):
    extra = ("--model", "m") if model_given else ()
    code, output = run_locust(tmp_path, f"http://127.0.0.1:{free_port()}", *extra)
    assert code == 2, output[-2000:]
    assert "Traceback" not in output
    errors = error_lines(output)
    assert errors and all("check --host" in line for line in errors), errors
    if model_given:  # every request failed to connect: the summary says so
        summary = read_summary(tmp_path)
        assert set(summary["failures"]) == {"connect"}
        assert "check --host" in summary["diagnosis"]


def test_wrong_model_name(tmp_path, keyed_sim):
    code, output = run_locust(tmp_path, keyed_sim.url, "--model", "no-such-model", env={"OPENAI_API_KEY": KEY})
    assert code == 2, output[-2000:]
    assert "Traceback" not in output
    summary = read_summary(tmp_path)
    assert set(summary["failures"]) == {"http_4xx"}
    assert "HTTP 404" in summary["diagnosis"] and "check --model" in summary["diagnosis"]
    assert any("check --model" in line for line in error_lines(output))


@pytest.mark.parametrize("model_given", [True, False])
def test_invalid_api_key_is_named_and_never_printed(tmp_path, keyed_sim, model_given):
    extra = ("--model", "llm-locust-sim") if model_given else ()
    code, output = run_locust(tmp_path, keyed_sim.url, *extra, env={"OPENAI_API_KEY": WRONG_KEY})
    assert code == 2, output[-2000:]
    assert "Traceback" not in output
    errors = " ".join(error_lines(output))
    assert "API key" in errors, output[-2000:]
    if model_given:
        summary = read_summary(tmp_path)
        assert "HTTP 401" in summary["diagnosis"] and "--api-key-env" in summary["diagnosis"]
        assert "[REDACTED]" in summary["diagnosis"]  # the server echoed the key: hidden
    assert_no_secret(tmp_path, output, WRONG_KEY)
    code, _ = run_locust(tmp_path, keyed_sim.url, *extra, env={"OPENAI_API_KEY": WRONG_KEY}, logfile=True)
    assert code == 2 and "API key" in (tmp_path / "locust.log").read_text()
    if model_given:  # the failures' messages, logged at DEBUG level, held the echoed key
        assert "[REDACTED]" in (tmp_path / "locust.log").read_text()
    assert_no_secret(tmp_path, "", WRONG_KEY)


@pytest.mark.parametrize("how", ["env", "flag", "config"])
def test_api_key_never_in_any_output(tmp_path, keyed_sim, how):
    """A successful run with the key from an env var, a flag or a config file: not a trace of it anywhere."""
    extra: tuple[str, ...] = ()
    env = {}
    if how == "env":
        env = {"MY_LLM_KEY": KEY}
        extra = ("--api-key-env", "MY_LLM_KEY")
    elif how == "flag":
        extra = ("--api-key", KEY)
    else:
        config = tmp_path.parent / f"{tmp_path.name}.conf"
        config.write_text(f"api-key = {KEY}\n")
        extra = ("--config", str(config))
    code, output = run_locust(tmp_path, keyed_sim.url, *extra, env=env, logfile=True)
    assert code == 0, output[-2000:]
    summary = read_summary(tmp_path)
    assert summary["throughput"]["requests_ok"] > 0 and summary["failures"] == {}
    assert summary["settings"]["api_key_set"] is True
    assert_no_secret(tmp_path, output, KEY)


FRAGMENT_CHARS = 12
"""A piece of a secret this long counts as a leak (a message cut short must not keep half a key)."""


def leaks(text: str, secrets: tuple[str, ...]) -> list[str]:
    """The secrets of which `text` holds a piece of `FRAGMENT_CHARS` characters (or all of a shorter one)."""
    found = []
    for secret in secrets:
        n = min(FRAGMENT_CHARS, len(secret))
        if any(secret[i : i + n] in text for i in range(len(secret) - n + 1)):
            found.append(secret)
    return found


def assert_no_secret(results: Path, output: str, *secrets: str) -> int:
    """No secret (nor a piece of one) in any file of `results` (CSV, JSON, HTML, log) or in the console
    output; returns the number of files scanned."""
    files = [p for p in results.rglob("*") if p.is_file()]
    assert {"summary.json", "report.html", "locust_stats.csv", "llm_timeseries.csv"} <= {p.name for p in files}
    for path in files:
        assert not leaks(path.read_text(errors="replace"), secrets), path
    assert not leaks(output, secrets)
    return len(files)
