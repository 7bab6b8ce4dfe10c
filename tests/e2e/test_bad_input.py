"""Bad input to the `locust` CLI: one line naming the problem and the fix, a non-zero exit code, no
traceback; and API keys never in any output (console, log file, CSVs, JSON, HTML report)."""

from __future__ import annotations

import socket

import pytest
from conftest import ROOT, free_port, read_summary, run_locust, short_run
from harness.output import assert_no_secret, error_lines

from llm_locust.sim import run_sim

KEY = "sk-live-SECRET-a1b2c3d4e5"
WRONG_KEY = "sk-wrong-SECRET-f6e5d4c3"


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
    code, output = short_run(tmp_path, host)
    assert code == 2, output[-2000:]
    errors = error_lines(output)
    assert len(errors) == 1 and message in errors[0] and "--host" in errors[0], output[-2000:]
    assert "Traceback" not in output


def test_prometheus_port_in_use_is_one_line(tmp_path, keyed_sim):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, output = short_run(tmp_path, keyed_sim.url, "--prometheus-port", str(port), env={"OPENAI_API_KEY": KEY})
    assert code == 2, output[-2000:]
    errors = error_lines(output)
    assert len(errors) == 1 and f"--prometheus-port {port}: cannot listen on 127.0.0.1:{port}" in errors[0], errors
    assert "Traceback" not in output


@pytest.mark.parametrize("model_given", [True, False])
def test_unreachable_host(tmp_path, model_given):
    extra = ("--model", "m") if model_given else ()
    code, output = short_run(tmp_path, f"http://127.0.0.1:{free_port()}", *extra)
    assert code == 2, output[-2000:]
    assert "Traceback" not in output
    errors = error_lines(output)
    assert errors and all("check --host" in line for line in errors), errors
    if model_given:  # every request failed to connect: the summary says so
        summary = read_summary(tmp_path)
        assert set(summary["failures"]) == {"connect"}
        assert "check --host" in summary["diagnosis"]


def test_wrong_model_name(tmp_path, keyed_sim):
    code, output = short_run(tmp_path, keyed_sim.url, "--model", "no-such-model", env={"OPENAI_API_KEY": KEY})
    assert code == 2, output[-2000:]
    assert "Traceback" not in output
    summary = read_summary(tmp_path)
    assert set(summary["failures"]) == {"http_4xx"}
    assert "HTTP 404" in summary["diagnosis"] and "check --model" in summary["diagnosis"]
    assert any("check --model" in line for line in error_lines(output))


@pytest.mark.parametrize("model_given", [True, False])
def test_invalid_api_key_is_named_and_never_printed(tmp_path, keyed_sim, model_given):
    extra = ("--model", "llm-locust-sim") if model_given else ()
    code, output = short_run(tmp_path, keyed_sim.url, *extra, env={"OPENAI_API_KEY": WRONG_KEY})
    assert code == 2, output[-2000:]
    assert "Traceback" not in output
    errors = " ".join(error_lines(output))
    assert "API key" in errors, output[-2000:]
    if model_given:
        summary = read_summary(tmp_path)
        assert "HTTP 401" in summary["diagnosis"] and "--api-key-env" in summary["diagnosis"]
        assert "[REDACTED]" in summary["diagnosis"]  # the server echoed the key: hidden
    assert_no_secret(tmp_path, output, WRONG_KEY)
    logged = tmp_path / "logged"  # a folder of its own: a results folder holding a run is refused
    logged.mkdir()
    code, _ = short_run(logged, keyed_sim.url, *extra, env={"OPENAI_API_KEY": WRONG_KEY}, logfile=True)
    assert code == 2 and "API key" in (logged / "locust.log").read_text()
    if model_given:  # the failures' messages, logged at DEBUG level, held the echoed key
        assert "[REDACTED]" in (logged / "locust.log").read_text()
    assert_no_secret(tmp_path, "", WRONG_KEY)


def test_an_unset_api_key_env_variable_is_named_at_start(tmp_path, keyed_sim):
    """--api-key-env naming a variable this process does not have: one line naming it, exit 2, nothing sent."""
    code, output = short_run(tmp_path, keyed_sim.url, "--model", "llm-locust-sim", "--api-key-env", "NO_SUCH_VAR")
    assert code == 2, output[-2000:]
    errors = error_lines(output)
    message = "--api-key-env NO_SUCH_VAR: the variable is not set in this process's environment"
    assert len(errors) == 1 and errors[0].endswith(message), output[-2000:]
    assert "Traceback" not in output and "HTTP 401" not in output
    assert not (tmp_path / "summary.json").exists()  # stopped before any request


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
    code, output = short_run(tmp_path, keyed_sim.url, *extra, env=env, logfile=True)
    assert code == 0, output[-2000:]
    summary = read_summary(tmp_path)
    assert summary["throughput"]["requests_ok"] > 0 and summary["failures"] == {}
    assert summary["settings"]["api_key_set"] is True
    assert_no_secret(tmp_path, output, KEY)


@pytest.mark.parametrize(
    ("locustfile", "args", "message"),
    [
        ("agent.py", (), "agent sessions need tools to call: pass --tools N"),
        ("agent.py", ("--tools", "2", "--session-turns", "3"), "--session-turns: an agent session is one user prompt"),
        ("agent.py", ("--tools-file", "missing.jsonl"), "--tools-file missing.jsonl: cannot read it"),
        ("agent.py", ("--tools", "2", "--tools-file", "x.jsonl"), "--tools and --tools-file exclude each other"),
        ("completions.py", ("--tools", "2"), "--tools / --tools-file: text completions takes no tools"),
    ],
)
def test_bad_agent_and_tools_options(tmp_path, locustfile, args, message):
    """Agents and tools: one error line naming the option, exit 2, no traceback."""
    result = run_locust(ROOT / "locustfiles" / locustfile, "--host", f"http://127.0.0.1:{free_port()}", "--model",
                        "m", "-u", "1", "-t", "2s", "--results-dir", str(tmp_path), *args, timeout_s=60)  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 2, output[-2000:]
    errors = error_lines(output)
    assert len(errors) == 1 and message in errors[0], output[-2000:]
    assert "Traceback" not in output
