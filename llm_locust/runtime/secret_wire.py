"""The master sends no secret to its workers; each worker uses its own (`config.wire` decides what crosses).

Master: every spawn message — Locust puts the master's options and host in it — leaves with the options and host of
`config.wire.wire_options` / `wire_host` instead (no API key, no header value, no URL credentials; the secrets' names),
whichever socket Locust uses then; a worker's refusal (`REFUSED_MESSAGE`) is logged and makes the run exit 2.
Worker (`WorkerGate`): at each test's start (its settings rebuilt from the master's options and its own secrets,
`shared.Shared`), before anything is sent, a worker whose own --host, --provider or --api-key-env is not the master's
refuses the test in one line naming the option (`config.wire.foreign_target`); then the host's credentials are put
back from its own --host, and a worker lacking a secret of the master's — or, signing for Bedrock, an AWS region (its
own, or its master's --host or --aws-region) — refuses the test in one line naming it: its users never start, no
token is fetched, and it quits with exit code 2.
"""

from __future__ import annotations

import logging
from typing import Any

import gevent
from locust.rpc import Message

from llm_locust.config.wire import (
    NAMES_KEY,
    SecretNames,
    Target,
    foreign_target,
    missing_secrets,
    wire_host,
    wire_options,
    with_credentials,
)
from llm_locust.transport.sigv4 import NO_REGION

logger = logging.getLogger("llm_locust")

REFUSED_MESSAGE = "llm_locust_refused"
"""Worker → master: this worker refuses the test (data: why, one line naming what to set)."""
EXIT_REFUSED = 2
"""The exit code of a refused test, on the worker and the master (bad configuration)."""


def master_sends_no_secret(state: Any, runner: Any) -> None:
    """Master: spawn messages without secrets (see the module docstring); `state`: the process's `shared.Shared`."""
    _guard(runner, state)
    reset = runner.reset_connection

    def reset_and_guard() -> None:
        reset()
        _guard(runner, state)  # the new socket's sends too

    runner.reset_connection = reset_and_guard
    runner.register_message(REFUSED_MESSAGE, _on_refused)


def _guard(runner: Any, state: Any) -> None:
    """Make the runner's current server send each spawn message without secrets (once per server)."""
    server = runner.server
    send = server.send_to_client
    if getattr(send, "without_secrets", False):
        return

    def send_without_secrets(msg: Message) -> Any:
        if msg.type == "spawn" and isinstance(msg.data, dict):
            msg = Message(msg.type, _spawn_data(msg.data, state), msg.node_id)
        return send(msg)

    send_without_secrets.without_secrets = True  # type: ignore[attr-defined]
    server.send_to_client = send_without_secrets


def _spawn_data(data: dict[str, Any], state: Any) -> dict[str, Any]:
    """A spawn message's `data` (Locust's) as it crosses the wire."""
    host = data.get("host")
    names = SecretNames.of(state.settings.endpoint, host)
    return {**data, "host": wire_host(host), "parsed_options": wire_options(data.get("parsed_options") or {}, names)}


def _on_refused(environment: Any, msg: Any, **_: Any) -> None:
    """Master: a worker refused the test: say so, and the run exits 2."""
    logger.error("worker %s refuses the test: %s", msg.node_id, msg.data)
    environment.process_exit_code = EXIT_REFUSED


class WorkerGate:
    """Worker: at each test's start, the master's target checked against the worker's own, its own URL credentials
    put back and its secrets checked against the master's names (see the module docstring)."""

    def __init__(self, state: Any, runner: Any) -> None:
        """`state`: the process's `shared.Shared`, just made — its options and host still the worker's own."""
        environment = state.environment
        self._state = state
        self._runner = runner
        self._own_host = environment.host  # its own --host, as given at start-up
        self._own = Target.of(environment.parsed_options, environment.host)

    def admits(self) -> bool:
        """Whether the test may start (its settings rebuilt, nothing sent yet); False: refused (`refuse`)."""
        environment = self._state.environment
        options = environment.parsed_options
        wire = getattr(options, NAMES_KEY, None)
        if wire is None:  # the options did not come from a master (nothing was left out)
            return True
        problem = foreign_target(Target.of(options, environment.host), self._own)
        if problem is None:
            environment.host = with_credentials(environment.host, self._own_host)
            endpoint = self._state.settings.endpoint
            problem = missing_secrets(SecretNames.from_wire(wire), SecretNames.of(endpoint, environment.host))
            if problem is None and endpoint.signs and not endpoint.aws_region:  # neither its own nor its master's
                problem = NO_REGION
        if problem is None:
            return True
        refuse(environment, self._runner, problem)
        return False


def refuse(environment: Any, runner: Any, problem: str) -> None:
    """Worker: refuse the test — say why, tell the master, start no user, quit with `EXIT_REFUSED`."""
    logger.error("this worker refuses the test: %s", problem)
    environment.process_exit_code = EXIT_REFUSED
    runner.start_worker = lambda *_, **__: None  # Locust's spawning greenlet, created next, starts no user
    runner.send_message(REFUSED_MESSAGE, problem)
    gevent.spawn(runner.quit)  # outside the runner's greenlets, which it kills
