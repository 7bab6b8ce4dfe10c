"""The first mistakes a newcomer makes, each against the simulator through the real `locust` CLI: one line naming the
cause and the fix, exit code 2, and a run that stops early instead of hammering the server (a configuration-class
error: `load.limits.configuration_failure`). A --host ending in /v1 is accepted (the base URL is what precedes it)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from conftest import LOCUSTFILE, read_summary, run_locust

from llm_locust.load.limits import CONFIGURATION_KINDS, configuration_failure
from llm_locust.sim import SimProcess, run_sim
from llm_locust.transport.replicas import without_api_root

SIM_ARGS = ("--ttft-ms", "10", "--itl-ms", "2", "--output-tokens", "8")
KEY = "sk-newcomer-SECRET-1a2b3c"
RUN_S = 20
"""The run time asked for: each failing run must stop itself long before it."""


def window(ok: int = 0, **failures: int) -> tuple[int, Counter[str]]:
    """(requests ok, failures by kind) of a run so far."""
    return ok, Counter(failures)


def test_configuration_failure_is_every_request_failing_with_one_configuration_kind():
    assert configuration_failure(*window(http_4xx=3)) is not None
    assert configuration_failure(*window(tls=1)) is not None
    assert configuration_failure(*window(ok=1, http_4xx=3)) is None  # something worked: the command can work
    assert configuration_failure(*window(http_4xx=3, http_5xx=1)) is None  # not the same error
    assert configuration_failure(*window(http_429=5)) is None  # throttled: the load, not the command
    assert configuration_failure(*window(connect=5)) is None  # a wrong port already ends in one line
    assert configuration_failure(*window()) is None


def test_a_host_ending_in_v1_loses_it_and_nothing_else():
    assert without_api_root("http://h:8000/v1") == "http://h:8000"
    assert without_api_root("http://h:8000/v1/") == "http://h:8000"
    assert without_api_root("http://a/v1,http://b:1") == "http://a,http://b:1"
    assert without_api_root("http://h:8000/api/") == "http://h:8000/api/"  # unchanged: no /v1 at the end
    assert without_api_root("http://h:8000/v10") == "http://h:8000/v10"


@pytest.fixture(scope="module")
def plain_sim() -> Iterator[SimProcess]:
    """The simulator over plain HTTP, wanting an API key."""
    with run_sim(*SIM_ARGS, "--api-key", KEY) as sim:
        yield sim


@pytest.fixture(scope="module")
def tls_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    """The simulator over HTTPS (a throw-away CA's certificate for 127.0.0.1)."""
    folder = tmp_path_factory.mktemp("pki")
    leaf = trustme.CA().issue_cert("127.0.0.1")
    (folder / "sim.crt").write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    leaf.private_key_pem.write_to_path(str(folder / "sim.key"))
    with run_sim(*SIM_ARGS, "--tls-cert", str(folder / "sim.crt"), "--tls-key", str(folder / "sim.key")) as sim:
        yield sim


def run(host: str, results_dir: Path, *extra: str, key: str | None = KEY) -> tuple[int, str]:
    """One user for up to `RUN_S` against `host`: (exit code, output). Its 80 s timeout is how long to wait for the
    processes on a loaded machine (Python's start-up alone took 30 s at a load average of 20), not a bound tested."""
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    if key is not None:
        env["OPENAI_API_KEY"] = key
    proc = run_locust(LOCUSTFILE, "--host", host, "-u", "1", "-r", "1", "-t", f"{RUN_S}s",
                      "--results-dir", str(results_dir), *extra, env=env, timeout_s=80)  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr


def error_line(output: str) -> str:
    """The one ERROR line llm-locust logged (its message)."""
    (line,) = [line for line in output.splitlines() if "/ERROR/llm_locust:" in line]
    print(line)
    return line.split("/ERROR/llm_locust: ", 1)[1]


def assert_stopped_early(results_dir: Path) -> None:
    """The run stopped itself for a configuration failure, well before `RUN_S` of load, after a handful of requests.
    The load's own duration (`run.duration_s`, from the test's start), not the wall time of the command: the
    processes' start-up, which a loaded machine stretches to tens of seconds, is no part of what is tested."""
    summary = read_summary(results_dir)
    assert summary["run"]["stop_reason"] in CONFIGURATION_KINDS.values(), summary["run"]
    assert summary["run"]["duration_s"] < RUN_S / 2, summary["run"]
    failed = summary["throughput"]["requests_failed"]
    assert failed <= 5, f"{failed} requests sent to a server that could only refuse them"


@pytest.mark.parametrize("model", [(), ("--model", "llm-locust-sim")], ids=["model-from-server", "model-given"])
def test_https_url_for_a_plain_http_server(plain_sim, tmp_path, model):
    host = plain_sim.url.replace("http://", "https://")
    code, output = run(host, tmp_path, *model)
    assert code == 2, output[-3000:]
    line = error_line(output)
    assert "answered the TLS handshake in plain HTTP" in line and f"use {plain_sim.url}" in line
    assert "Traceback" not in output
    if model:
        assert_stopped_early(tmp_path)


@pytest.mark.parametrize("model", [(), ("--model", "llm-locust-sim")], ids=["model-from-server", "model-given"])
def test_http_url_for_an_https_server(tls_sim, tmp_path, model):
    host = tls_sim.url.replace("https://", "http://")
    code, output = run(host, tmp_path, *model)
    assert code == 2, output[-3000:]
    line = error_line(output)
    assert "the server speaks TLS" in line and f"use {tls_sim.url}" in line
    if model:
        assert_stopped_early(tmp_path)


def test_host_ending_in_v1_is_the_base_url_said_once(plain_sim, tmp_path):
    code, output = run(plain_sim.url + "/v1", tmp_path, "-t", "3s")
    assert code == 0, output[-3000:]
    said = [line for line in output.splitlines() if "the base URL is" in line]
    assert len(said) == 1 and said[0].endswith(f"--host {plain_sim.url}/v1: the base URL is {plain_sim.url} "
                                               "(llm-locust's API paths start with /v1)")  # fmt: skip
    assert read_summary(tmp_path)["throughput"]["requests_ok"] > 0


def test_wrong_model_stops_early_with_one_line(plain_sim, tmp_path):
    code, output = run(plain_sim.url, tmp_path, "--model", "no-such-model")
    assert code == 2, output[-3000:]
    line = error_line(output)
    assert "HTTP 404" in line and "no-such-model" in line and "check --model (GET /v1/models lists" in line
    assert "ending the run: every request was refused with HTTP 4xx" in output
    assert_stopped_early(tmp_path)


@pytest.mark.parametrize("key", [None, "sk-wrong-key"], ids=["missing", "wrong"])
def test_missing_or_wrong_key_stops_early_with_one_line(plain_sim, tmp_path, key):
    code, output = run(plain_sim.url, tmp_path, "--model", "llm-locust-sim", key=key)
    assert code == 2, output[-3000:]
    line = error_line(output)
    assert "HTTP 401" in line and "the API key was rejected" in line and "--api-key-env" in line
    assert KEY not in output and "sk-wrong-key" not in output
    assert_stopped_early(tmp_path)


def test_missing_key_without_model_is_one_line(plain_sim, tmp_path):
    code, output = run(plain_sim.url, tmp_path, key=None)
    assert code == 2, output[-3000:]
    assert "answered HTTP 401: check the API key" in error_line(output)
