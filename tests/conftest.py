"""Shared helpers: real Locust runners (local, master + workers) driven against the simulator.

Locust monkey-patches the standard library with gevent when it is imported; it is imported
here first so that it happens before anything else in the test process.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent
import gevent.util
import greenlet
import locust  # noqa: F401  (gevent monkey-patching must come first)
import pytest
import trustme
from gevent.monkey import get_original
from locust import events as global_events
from locust.argument_parser import parse_options
from locust.env import Environment
from locust.event import Events
from locust.runners import STATE_STOPPED

from llm_locust.config.link_auth import free_port
from llm_locust.runtime.plugin import install
from llm_locust.runtime.users import ChatCompletionsUser
from llm_locust.sim import run_sim

ROOT = Path(__file__).resolve().parent.parent
LOCUSTFILE = ROOT / "locustfiles" / "chat.py"

install(global_events)  # our options on Locust's parser (parse_options fires the global event)

# Ctrl-C as a terminal delivers it, whatever started the suite: a shell without job control starts a background job
# (`cmd &` in a script, `nohup ... &`) with SIGINT ignored, and an ignored SIGINT is inherited by every process the
# tests start, so the Ctrl-C tests (test_interrupt.py) waited 60 s for a run that never heard it. A handler (unlike
# SIG_IGN) is reset to the default across exec: each locust process the tests start installs Python's own again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> bool:
    """pytest-timeout's SIGALRM, made to fail the test itself: the signal lands in whichever greenlet is running,
    often a server's handler spinning in the hub, where pytest-timeout's own raise would only kill that greenlet
    and let the test pass. Every greenlet's stack goes to stderr, then the test's (root) greenlet gets the failure."""

    def on_timeout(_signum: int, _frame: Any) -> None:
        sys.stderr.write(f"\n{item.nodeid}: over {settings.timeout:g} s, every greenlet's stack:\n")
        sys.stderr.write("\n".join(gevent.util.format_run_info()) + "\n")
        failure = pytest.fail.Exception(f"Timeout: the test ran over {settings.timeout:g} s (stacks on stderr)")
        root = greenlet.getcurrent()
        while root.parent is not None:
            root = root.parent
        if greenlet.getcurrent() is root:
            raise failure
        root.throw(failure)

    def cancel() -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)

    item.cancel_timeout = cancel  # pytest-timeout's own cancel hook calls it
    signal.signal(signal.SIGALRM, on_timeout)
    signal.setitimer(signal.ITIMER_REAL, settings.timeout)
    return True


native_sleep = get_original("time", "sleep")


class _PolledFlag:
    """An event for pytest-xdist's worker queue that never waits in gevent's hub (see `pytest_configure`)."""

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def clear(self) -> None:
        self._set = False

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._set and (deadline is None or time.monotonic() < deadline):
            native_sleep(0.002)
        return self._set


def pytest_configure(config: pytest.Config) -> None:
    """In a pytest-xdist worker (`make test`): execnet and pytest-xdist make their locks and events when they need
    them, through their execution model, from `threading`, which Locust's monkey-patching (imported above) made
    gevent's. Waited on in the main thread while execnet's receiver thread (a real thread) sets it, a gevent event
    with nothing else in the hub ends the worker ("LoopExit: This operation would block forever", locustio/locust#3202),
    at its first wait for a test and at its exit. The worker's execution model gets native locks, threads and sleep,
    and a polled flag for an event; the queue of tests to run, made before this hook, gets them too."""
    if not hasattr(config, "workerinput"):
        return
    for plugin in config.pluginmanager.get_plugins():
        queue = getattr(plugin, "torun", None)
        if type(plugin).__name__ == "WorkerInteractor" and queue is not None:
            model = plugin.channel.gateway.execmodel
            model.Event = _PolledFlag
            model.Lock = model.RLock = get_original("_thread", "RLock")
            model.sleep = native_sleep
            model.start = lambda func, args=(): get_original("_thread", "start_new_thread")(func, args)
            model.get_ident = get_original("_thread", "get_ident")
            queue._lock = model.RLock()
            queue._has_items_event = _PolledFlag()


CHEAP_MODULE_FIXTURES = {"fixed_sim", "fast_sim", "pki"}
"""Module fixtures that take a second or two: a module using only these spreads over the xdist workers (each worker
starts its own)."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `pytest -n N --dist loadgroup` (`make test`): a module with a module- or class-scoped fixture of its own
    (a run several tests read, a module's simulator) runs on one worker, so the fixture is built once, not once per
    worker; every other test goes to whichever worker is free. Without pytest-xdist (a venv made before it was a
    dependency), nothing to group."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        fixtures = getattr(item, "_fixtureinfo", None)
        if fixtures is None:
            continue
        shared = any(
            definitions[-1].scope in ("module", "class", "package")
            for name, definitions in fixtures.name2fixturedefs.items()
            if name not in CHEAP_MODULE_FIXTURES and definitions
        )
        if shared:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


class ChatUser(ChatCompletionsUser):
    """The chat user as a locustfile would define it."""


def options(*args: str) -> Any:
    """Locust's parsed options, ours included."""
    return parse_options(args=["-f", str(LOCUSTFILE), *args])


def new_env(opts: Any, user_classes: list | None = None) -> Environment:
    """A fresh Environment with its own Events (no listener shared between tests)."""
    events = Events()
    install(events)
    return Environment(user_classes=user_classes or [ChatUser], events=events, parsed_options=opts, host=opts.host)


def run_local(
    opts: Any,
    users: int,
    seconds: float,
    user_classes: list | None = None,
    stop_timeout_s: float | None = None,
    spawn_rate: float | None = None,
    until_stopped: bool = False,
) -> Environment:
    """Run a LocalRunner for `seconds`, then stop and quit it like the CLI does (`stop_timeout_s`:
    Locust's --stop-timeout, users finish their request in flight; `spawn_rate`: users started per second, default
    all at once; `until_stopped`: quit as soon as the test stopped itself, e.g. at --max-requests, `seconds` at
    most)."""
    env = new_env(opts, user_classes)
    if stop_timeout_s is not None:
        env.stop_timeout = stop_timeout_s
    runner = env.create_local_runner()
    env.events.init.fire(environment=env, runner=runner, web_ui=None)
    runner.start(users, spawn_rate=spawn_rate or users)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not (until_stopped and runner.state == STATE_STOPPED):
        gevent.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
    runner.quit()
    env.events.quitting.fire(environment=env, reverse=True)
    return env


def start_master_and_workers(
    opts: Any,
    workers: int = 2,
    on_worker: Callable[[int, Environment], None] | None = None,
    user_classes: list | None = None,
) -> tuple[Environment, Any, list[Any]]:
    """A master runner with `opts` and `workers` worker runners in this process (real ZeroMQ over loopback; each worker
    its own Environment, its options the master's spawn message); `on_worker(index, env)` adds a worker's listeners
    (after llm-locust's own); `user_classes`: the locustfile's (default: the chat user). Returns (the master's
    environment, the master, the workers) once all are connected."""
    master_env = new_env(opts, user_classes)
    master = master_env.create_master_runner("127.0.0.1", 0)
    master_env.events.init.fire(environment=master_env, runner=master, web_ui=None)
    runners = []
    for index in range(workers):
        worker_env = new_env(options(), user_classes)
        worker = worker_env.create_worker_runner("127.0.0.1", master.server.port)
        worker_env.events.init.fire(environment=worker_env, runner=worker, web_ui=None)
        if on_worker is not None:
            on_worker(index, worker_env)
        runners.append(worker)
    wait_for(lambda: master.worker_count == workers, 10, f"{workers} workers to connect to the master")
    return master_env, master, runners


def quit_master(master_env: Environment) -> None:
    """Quit the master (and so its workers) as the CLI does at the end of a run: the results are written."""
    master_env.runner.quit()
    master_env.events.quitting.fire(environment=master_env, reverse=True)


def master_port_args() -> list[str]:
    """Locust options putting a master and its `--processes` workers on a free port."""
    port = str(free_port())
    return ["--master-bind-host", "127.0.0.1", "--master-bind-port", port, "--master-port", port]


def run_locust(
    locustfile: Path, *args: str, timeout_s: float = 90, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the `locust` CLI headless with `locustfile` and `args` (bounded by `timeout_s`); with
    `--processes`, on a free master port (another run's workers must never join this master)."""
    command = [sys.executable, "-m", "locust", "-f", str(locustfile), "--headless", *args]
    if "--processes" in args:
        command += master_port_args()
    return subprocess.run(
        command, cwd=ROOT, env=env or dict(os.environ), capture_output=True, text=True, timeout=timeout_s
    )


def short_run(
    tmp_path: Path, host: str, *extra: str, env: dict | None = None, logfile: bool = False
) -> tuple[int, str]:
    """A short headless `locust` run writing every output Locust can write into `tmp_path`, with `env` added to this
    process's environment; -> (exit code, console).

    `logfile`: log (at DEBUG level) to locust.log in `tmp_path` instead of the console.
    """
    proc = run_locust(
        LOCUSTFILE, "-u", "2", "-r", "2", "--run-time", "3s", "--host", host, "--max-tokens", "8",
        "--results-dir", str(tmp_path), "--csv", str(tmp_path / "locust"), "--csv-full-history",
        "--html", str(tmp_path / "report.html"), "--loglevel", "DEBUG",
        *(("--logfile", str(tmp_path / "locust.log")) if logfile else ()), *extra,
        timeout_s=60, env={**os.environ, **(env or {})},
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr


def wait_for(predicate: Any, timeout_s: float, what: str) -> Any:
    """Poll `predicate` until it returns something true (returned); fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def read_summary(results_dir: Path) -> dict[str, Any]:
    return json.loads((results_dir / "summary.json").read_text())


@pytest.fixture(scope="module")
def fixed_sim():
    """Simulator with fixed timing: TTFT 200 ms, ITL 20 ms, 64 tokens."""
    with run_sim("--ttft-ms", "200", "--itl-ms", "20", "--output-tokens", "64") as sim:
        yield sim


@pytest.fixture(scope="module")
def fast_sim():
    """Simulator with short fixed timing for functional runs."""
    with run_sim("--ttft-ms", "20", "--itl-ms", "5", "--output-tokens", "16") as sim:
        yield sim


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ca.pem (a throw-away CA) and certificate/key pairs: good (127.0.0.1 and localhost, by the CA),
    other_name (by the CA, for another host), expired (by the CA), unknown_issuer (by another CA)."""
    folder = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    now = datetime.datetime.now(datetime.UTC)
    expired = {"not_before": now - datetime.timedelta(days=3), "not_after": now - datetime.timedelta(days=1)}
    leaves = {
        "good": ca.issue_cert("127.0.0.1", "localhost"),
        "other_name": ca.issue_cert("llm.example.com"),
        "expired": ca.issue_cert("127.0.0.1", **expired),
        "unknown_issuer": trustme.CA().issue_cert("127.0.0.1"),
    }
    for name, leaf in leaves.items():
        (folder / f"{name}.crt").write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
        leaf.private_key_pem.write_to_path(str(folder / f"{name}.key"))
    return folder
