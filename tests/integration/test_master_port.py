"""The master port hands out no secret: a process joining it as a worker (Locust's own ZeroMQ client and messages)
receives neither the API key nor a header value nor URL credentials, in any form; real workers take them from
their own environment, and a worker lacking one refuses the test in one line naming it (config/wire.py,
runtime/secret_wire.py)."""

from __future__ import annotations

import base64
import csv
import html
import json
import logging
import os
import secrets
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import gevent
import msgpack
from conftest import LOCUSTFILE, ROOT, free_port, new_env, options, quit_master, wait_for
from harness.output import leaks
from harness.recording_server import RecordingServer
from locust import __version__
from locust.rpc import Message, zmqrpc

from llm_locust.config.wire import NAMES_KEY
from llm_locust.redact import REDACTED
from llm_locust.runtime.secret_wire import EXIT_REFUSED
from llm_locust.sim import run_sim

AWKWARD = "'&<>\"%"
"""Characters that JSON, HTML and URLs each escape their own way."""


def planted() -> str:
    return f"{secrets.token_hex(8)}{AWKWARD}{secrets.token_hex(8)}"


def forms(secret: str) -> tuple[str, ...]:
    """`secret` as written and in every escaped form a message could carry it."""
    return (
        secret,
        json.dumps(secret)[1:-1],
        "".join(c if c.isalnum() else f"\\u{ord(c):04x}" for c in secret),  # as some JSON writers escape
        html.escape(secret),
        quote(secret, safe=""),
        quote(secret),
    )


def test_a_process_joining_the_master_port_as_a_worker_receives_no_secret(tmp_path: Path):
    key, gateway, team, password = planted(), planted(), planted(), planted()
    basic = base64.b64encode(f"alice:{password}".encode()).decode()
    every = tuple({form for secret in (key, gateway, team, password) for form in forms(secret)} | {basic})
    opts = options(
        "--host", f"http://alice:{quote(password, safe='')}@127.0.0.1:9", "--api-key", key, "--model", "m",
        "--header", f"A-Gw: {gateway}", "--header", f"A-Tm: {team}", "--results-dir", str(tmp_path),
        "--metrics-url", f"http://alice:{quote(password, safe='')}@127.0.0.1:9/metrics",
    )  # fmt: skip
    master_env = new_env(opts)
    master = master_env.create_master_runner("127.0.0.1", 0)
    master_env.events.init.fire(environment=master_env, runner=master, web_ui=None)
    stranger = zmqrpc.Client("127.0.0.1", master.server.port, "stranger")
    received: list[bytes] = []

    def listen() -> None:
        while True:
            received.append(stranger.socket.recv())

    def beat() -> None:
        while True:
            state = {"state": "ready", "current_cpu_usage": 1.0, "current_memory_usage": 1}
            stranger.send(Message("heartbeat", state, "stranger"))
            gevent.sleep(1)

    listener, beater = gevent.spawn(listen), gevent.spawn(beat)
    try:
        stranger.send(Message("client_ready", __version__, "stranger"))
        wait_for(lambda: master.worker_count == 1, 10, "the stranger to join")
        gevent.spawn(master.start, 2, 2)

        def spawned() -> bool:
            gevent.sleep(0.1)
            return any(Message.unserialize(raw).type == "spawn" for raw in received)

        wait_for(spawned, 10, "the spawn message")
        gevent.sleep(2.5)  # heartbeat answers, plans
    finally:
        quit_master(master_env)
        gevent.sleep(0.5)
        gevent.killall([listener, beater])
        stranger.close(linger=0)
    messages = [Message.unserialize(raw) for raw in received]
    types = {m.type for m in messages}
    assert {"ack", "spawn", "heartbeat", "quit"} <= types, types
    for raw, message in zip(received, messages, strict=True):
        decoded = msgpack.unpackb(raw, raw=False, strict_map_key=False)
        dumped = (json.dumps(decoded, default=str), json.dumps(decoded, default=str, ensure_ascii=False))
        for text in (raw.decode("utf-8", errors="replace"), raw.decode("latin-1"), repr(decoded), *dumped):
            assert not leaks(text, every), message.type
    (spawn, *_) = [m for m in messages if m.type == "spawn"]
    sent = spawn.data["parsed_options"]
    assert spawn.data["host"] == sent["host"] == "http://127.0.0.1:9" and sent["model"] == "m"
    assert "api_key" not in sent and "header" not in sent and "metrics_url" not in sent
    assert sent[NAMES_KEY] == {"api_key_env": "OPENAI_API_KEY", "headers": ["A-Gw", "A-Tm"],
                               "credential_urls": ["http://127.0.0.1:9"]}  # fmt: skip


def locust(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """A `locust` process with the chat locustfile, `args` and `env` added to this process's environment."""
    return subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), *args], cwd=ROOT, env={**os.environ, **env},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def distributed_run(sim_url: str, results: Path, master_env: dict[str, str], worker_env: dict[str, str]):
    """A headless master + 2 worker processes (each its own environment): (master's code and output, workers' codes
    and outputs)."""
    port = str(free_port())
    master = locust(
        master_env, "--master", "--headless", "--master-bind-host", "127.0.0.1", "--master-bind-port", port,
        "--expect-workers", "2", "-u", "4", "-r", "4", "--run-time", "4s", "--host", sim_url, "--model",
        "llm-locust-sim", "--api-key-env", "LLM_WIRE_KEY", "--max-tokens", "8", "--results-dir", str(results),
        "--csv", str(results / "locust"),
    )  # fmt: skip
    workers = [locust(worker_env, "--worker", "--master-host", "127.0.0.1", "--master-port", port) for _ in range(2)]
    try:
        out = master.communicate(timeout=90)[0]
        done = [(w.wait(30), w.communicate()[0]) for w in workers]
    finally:
        for proc in (master, *workers):
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    return (master.returncode, out), done


def test_workers_send_the_key_and_headers_of_their_own_environment(tmp_path: Path):
    key, team = planted(), planted()
    env = {"LLM_WIRE_KEY": key, "LLM_LOCUST_HEADERS": f"A-Tm: {team}"}
    with run_sim("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "8", "--api-key", key, "--echo-headers",
                 "--fault", "http_500=0.2", "--fault-seed", "3") as sim:  # fmt: skip
        (_, out), done = distributed_run(sim.url, tmp_path, env, env)
        served = len(sim.trace())
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["run"]["workers_max"] == 2 and summary["throughput"]["requests_ok"] > 0, out[-3000:]
    assert set(summary["failures"]) == {"http_5xx"}, summary["failures"]  # none refused: every request had the key
    assert summary["throughput"]["requests_ok"] + summary["throughput"]["requests_failed"] <= served
    with (tmp_path / "locust_failures.csv").open() as f:  # the server echoed the header each worker sent
        assert f"a-tm: {REDACTED}" in " ".join(row["Error"] for row in csv.DictReader(f))
    for worker_code, worker_out in done:
        assert worker_code == 0 and "refuses" not in worker_out, worker_out[-3000:]
    assert not leaks(out + "".join(o for _, o in done), (key, team))


def test_a_worker_without_the_key_refuses_the_test_naming_the_variable(tmp_path: Path):
    with run_sim("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "8") as sim:
        (code, out), done = distributed_run(sim.url, tmp_path, {"LLM_WIRE_KEY": planted()}, {"LLM_WIRE_KEY": ""})
        served = len(sim.trace())
    assert served == 0
    for worker_code, worker_out in done:
        said = [line for line in worker_out.splitlines() if "this worker refuses the test" in line]
        assert worker_code == EXIT_REFUSED and len(said) == 1, worker_out[-3000:]
        assert "set LLM_WIRE_KEY in the worker's environment" in said[0]
    assert code == EXIT_REFUSED, out[-3000:]
    refused = [line for line in out.splitlines() if "refuses the test: the master sends an API key" in line]
    assert len(refused) == 2, out[-3000:]


def worker_of(master, *own: str):
    """A worker runner in this process with its `own` options, joined to `master` (its environment, its runner)."""
    env = new_env(options(*own))
    worker = env.create_worker_runner("127.0.0.1", master.server.port)
    env.events.init.fire(environment=env, runner=worker, web_ui=None)
    return env, worker


def test_a_worker_refuses_a_master_aiming_its_key_at_another_host(fast_sim, tmp_path, monkeypatch, caplog):
    """A worker started with its own --host and key variable joins a master naming another host and --api-key-env:
    it refuses in one line naming both options (no value of its key), and neither server gets a request; a worker
    naming the master's own host and variable runs."""
    key = planted()
    monkeypatch.setenv("LLM_OWN_KEY", key)
    monkeypatch.setenv("LLM_MASTER_KEY", key)
    with RecordingServer() as foreign:
        master_env = new_env(options("--host", foreign.url, "--api-key-env", "LLM_MASTER_KEY", "--model", "m",
                                     "--max-tokens", "4", "--results-dir", str(tmp_path / "foreign")))  # fmt: skip
        master = master_env.create_master_runner("127.0.0.1", 0)
        master_env.events.init.fire(environment=master_env, runner=master, web_ui=None)
        worker_env, _ = worker_of(master, "--host", fast_sim.url, "--api-key-env", "LLM_OWN_KEY")
        wait_for(lambda: master.worker_count == 1, 10, "the worker to join")
        served_before = len(fast_sim.trace())
        caplog.set_level(logging.INFO, logger="llm_locust")
        master.start(2, spawn_rate=2)
        wait_for(lambda: worker_env.process_exit_code == EXIT_REFUSED, 10, "the worker to refuse")
        gevent.sleep(1.5)
        quit_master(master_env)
        said = [record.getMessage() for record in caplog.records]
        assert foreign.requests == [] and len(fast_sim.trace()) == served_before
    refusals = [line for line in said if "this worker refuses the test" in line]
    assert len(refusals) == 1, said
    said_host = f"the master's --host {foreign.url} is not on a server of this worker's own --host {fast_sim.url}"
    assert said_host in refusals[0]
    assert "the master's --api-key-env LLM_MASTER_KEY is not this worker's own LLM_OWN_KEY" in refusals[0]
    assert master_env.process_exit_code == EXIT_REFUSED and not leaks(" ".join(said), (key,))

    master_env = new_env(options("--host", fast_sim.url, "--api-key-env", "LLM_OWN_KEY", "--model", "llm-locust-sim",
                                 "--max-tokens", "4", "--results-dir", str(tmp_path / "own")))  # fmt: skip
    master = master_env.create_master_runner("127.0.0.1", 0)
    master_env.events.init.fire(environment=master_env, runner=master, web_ui=None)
    worker_env, _ = worker_of(master, "--host", f"{fast_sim.url}/", "--api-key-env", "LLM_OWN_KEY")
    wait_for(lambda: master.worker_count == 1, 10, "the worker to join")
    master.start(2, spawn_rate=2)
    gevent.sleep(2)
    quit_master(master_env)
    assert worker_env.process_exit_code in (None, 0)
    assert json.loads((tmp_path / "own" / "summary.json").read_text())["throughput"]["requests_ok"] > 0
