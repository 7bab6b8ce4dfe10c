"""Locust User classes that send requests to an LLM endpoint and measure them.

`LLMUser`: a user whose tasks call the endpoint through `self.llm` (the scenario client, `llm_client.LLMClient`;
docs/scenarios.md). The built-in users are `ApiUser`s — `LLMUser`s with one task that draws the next request from the
workload —, made here from the APIs' entries (`BUILT_IN_USERS`: `ChatCompletionsUser`, `CompletionsUser`, ..., named
by `Api.user` and `Api.agent_user`). Each names its API (`endpoint`, a key of `apis.APIS`), which says everything else.
They send when the process's pacer hands them a ticket: in closed loop as soon as their last request ended, in
open loop (`--request-rate`) at the due times of the arrival process; a session's next turn when its previous
answer ended plus its think time (synthetic sessions: with a ticket of its own; a trace's session: its delay, and
no ticket — the session's first turn was its arrival). What a user sends is its `Workload`'s
business; the path and auth headers come from the provider. Subclass them in a locustfile (see
locustfiles/chat.py) after `llm_locust.plugin.install(events)`; the plugin supplies the settings (command-line
options) and collects the metrics.
"""

from __future__ import annotations

import random
from functools import partial
from itertools import count
from time import perf_counter
from typing import Any, ClassVar

import gevent
import orjson
from locust import FastHttpUser, constant, task

from llm_locust.apis import BUILT_IN, Api, api
from llm_locust.errors import ConfigError
from llm_locust.load.pacing import NO_STEP, Ticket
from llm_locust.metrics.request import JSON
from llm_locust.redact import redact
from llm_locust.runtime.llm_client import LLMClient
from llm_locust.runtime.plugin import user_context
from llm_locust.transport import sigv4
from llm_locust.transport.cancel import Canceller
from llm_locust.transport.client import FastTransport
from llm_locust.transport.providers import auth_headers, provider_headers
from llm_locust.transport.proxy import env_proxy
from llm_locust.transport.redirects import is_redirect, redirect_reason
from llm_locust.transport.replicas import ReplicaSet
from llm_locust.transport.request import Transport
from llm_locust.transport.tls import context_factory, tls_problem
from llm_locust.transport.websocket import Opener
from llm_locust.workload.builder import Workload
from llm_locust.workload.tokens import token_counter


class LLMUser(FastHttpUser):
    """A Locust user whose tasks call an LLM endpoint through `self.llm` (`llm_client.LLMClient`: a call per
    registered API), every request measured like the built-in users' (they are `LLMUser`s too). `self.client` stays
    Locust's FastHttp session (for any other HTTP call of the scenario).

    Timeouts, TLS trust, proxy, auth and provider headers, replicas and the client (`--client`) come from the
    settings; the model from --model or the server's list. Subclass it in a locustfile after
    `llm_locust.plugin.install(events)` and write `@task`s (docs/scenarios.md)."""

    abstract = True
    wait_time = constant(0)
    max_redirects = 0  # FastHttpUser's session follows no redirect: a 3xx is returned as is (`transport.redirects`)

    def __init__(self, environment: Any) -> None:
        state = user_context(environment)
        settings = state.settings
        # FastHttpUser reads these when it builds its client in __init__; read and request
        # timeouts are the watchdog's (a socket timeout would cost a timer per read)
        self.connection_timeout = settings.timeouts.connect_timeout_s
        self.network_timeout = None
        self.insecure = settings.endpoint.insecure  # FastHttpUser's default (True) verifies nothing
        self.ssl_context_factory = context_factory(settings.endpoint.ca_bundle, settings.endpoint.insecure)
        replicas = state.replicas(self.host or "")
        if replicas.several:  # the session's base URL: the first replica (its credentials go per request)
            self.host = replicas.first.url
        try:  # HTTPS_PROXY / HTTP_PROXY / NO_PROXY (the SDK's httpx reads them itself)
            proxy = env_proxy(self.host)
        except ConfigError:  # a proxy only httpx can use: fatal for the fast client (checked at start)
            if settings.endpoint.client == "fast":
                raise
            proxy = None  # openai-sdk: only the /v1/models lookup goes direct
        if proxy is not None:
            self.proxy_host, self.proxy_port = proxy.host, proxy.port
        super().__init__(environment)
        if proxy is not None and (proxy.user is not None or proxy.password is not None):
            # FastHttpUser passes no proxy credentials: its client pool builds each host's client from these
            self.client.client.clientpool.client_args.update(proxy_user=proxy.user, proxy_password=proxy.password)
        headers = {
            "Content-Type": JSON,
            "Accept-Encoding": "identity",
            **auth_headers(settings.endpoint.provider, settings.endpoint.api_key),
            **provider_headers(settings.endpoint.provider),
            **dict(settings.endpoint.header),
        }
        tokenizer = settings.workload.tokenizer
        counter = token_counter(tokenizer) if tokenizer else None  # --tokenizer: counts the streamed text
        # the draws of cancellations: a stream of their own (seeded by --seed)
        canceller = Canceller(settings.cancel, self._cancel_seed() if settings.cancel.cancel_rate else 0)
        transport: Transport
        point = settings.endpoint  # --provider bedrock without an API key: each request SigV4-signed as sent;
        auth = sigv4.signer(point.aws_region) if point.signs else state.request_auth  # else the OAuth token, if any
        if settings.endpoint.client == "openai-sdk":
            from llm_locust.transport.sdk_client import SdkTransport  # imports openai: only when asked for

            transport = SdkTransport(self.host or "", settings.endpoint, settings.timeouts, state.watchdog, counter)
        else:
            transport = FastTransport(  # its stream pump's turns end by the process's next send due
                self.client,
                headers,
                state.watchdog,
                counter,
                auth,
                settings.timeouts.max_event_bytes,
                state.pacer.sends.next_s,
            )
        models = partial(_first_model, self.client, self.host or "", headers, replicas)
        # a WebSocket API's sessions (`Api.turn`) go over sockets of their own, whichever the client
        tls_context, connect_s = self.ssl_context_factory(), settings.timeouts.connect_timeout_s
        sockets = Opener(self.host or "", headers, auth, tls_context, connect_s, state.pacer.sends.next_s)
        self.llm = LLMClient(state, transport, replicas, canceller, environment.events, self.context, models, sockets)
        task_wait = self.wait_time

        def wait_time() -> float:  # Locust asks it after each task, in the waiting state: the task's arrival ends
            self.llm.end_arrival()
            return task_wait()

        self.wait_time = wait_time  # type: ignore[method-assign]

    def _cancel_seed(self) -> int:
        """The seed of this user's cancellation draws: one per user, repeated by --seed."""
        context = user_context(self.environment)
        settings, worker = context.settings.workload, context.worker_index
        seed = settings.seed
        return random.Random(None if seed is None else f"{seed}/{worker}/cancel/{next(_user_numbers)}").getrandbits(64)


_user_numbers = count()
"""Numbers the scenario users of this process (their cancellation seeds)."""


def _first_model(client: Any, host: str, headers: dict[str, str], replicas: ReplicaSet) -> str:
    """The id of the first model the server lists at /v1/models (asked through the user's Locust `client`);
    ConfigError naming the fix."""
    auth = {"auth": replicas.first.auth} if replicas.several and replicas.first.auth else {}
    with client.get("/v1/models", headers=headers, catch_response=True, **auth) as resp:
        status = resp.status_code
        if is_redirect(status):
            reason = redirect_reason(status, resp.headers.get("location") if resp.headers else None)
            resp.failure(f"redirect: {reason}")
            raise ConfigError(f"--model not given and GET {redact(host)}/v1/models answered {reason} (or pass --model)")
        if status != 200:
            resp.failure(f"HTTP {status}")
            problem = tls_problem(host, resp.error) if not status else None
            if problem is not None:
                raise ConfigError(problem)
            if not status:  # no response at all
                cause = getattr(resp.error, "original", None) or resp.error  # unwrap RetriesExceeded
                raise ConfigError(
                    f"could not connect to {redact(host)} ({redact(f'{type(cause).__name__}: {cause}')}): "
                    "check --host and that the server is running"
                )
            fix = "check the API key (--api-key-env / --api-key)" if status in (401, 403) else "pass --model NAME"
            raise ConfigError(f"--model not given and GET {redact(host)}/v1/models answered HTTP {status}: {fix}")
        try:
            return orjson.loads(resp.content)["data"][0]["id"]
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
            resp.failure("no model listed")
            raise ConfigError(
                f"--model not given and {redact(host)}/v1/models lists no model: pass --model NAME"
            ) from None


class ApiUser(LLMUser):
    """The built-in user of one API (a subclass names its `endpoint`, a key of `apis.APIS`): one request per task,
    drawn from its `Workload` (the command-line options) and sent through `self.llm` like a scenario's."""

    abstract = True
    endpoint: ClassVar[str]  # a key of apis.APIS
    agent: ClassVar[bool] = False  # plays agent sessions (workload.agent): each task sends one step

    def __init__(self, environment: Any) -> None:
        state = user_context(environment)
        settings = state.settings
        self.workload = Workload(
            settings.workload, self.endpoint, state.worker_index, state.trace,
            state.prefix_pool, server_family=settings.endpoint.server_family, agent=self.agent,
        )  # fmt: skip
        super().__init__(environment)
        self.api = api(self.endpoint)
        self.path = self.llm.path(self.endpoint)
        self.session_header = settings.workload.session_header
        self.model = ""
        self._follow_up = Ticket(None, NO_STEP, True)  # the ticket of a trace session's next turn

    def _cancel_seed(self) -> int:
        """The cancellation draws' seed: from the workload's RNG (seeded by --seed)."""
        return self.workload.rng.getrandbits(64)

    @task
    def complete(self) -> None:
        """Send one request when the pacer says so (through the transport chosen at start) and read it to the end.

        The model is resolved on the first request (not in `on_start`: Locust prints a traceback
        for any exception there, and a wrong --host is a user error). Azure and Databricks name
        the model in the path: their default model is the deployment.
        """
        llm, workload = self.llm, self.workload
        if not self.model and not workload.settings.model_mix:  # a mix names each request's model
            self.model = llm.model
        # a trace session's next turn: due at its predecessor's answer plus its delay (no ticket of the sequence)
        ticket = self._follow_up if workload.in_trace_session else llm.take_ticket(new_session=workload.starts_session)
        # the plan the ticket was issued under (no greenlet switch since): its step sets a length sweep's lengths;
        # in a trace replay, the ticket's index is the trace's arrival
        request = workload.next_request(self.model, llm.step, ticket.index)
        headers = {self.session_header: request.session} if self.session_header else {}
        # the workload hears of the answer before the report: an agent step's figures go on the record
        llm.request(self.api, self.path, request, headers, ticket, workload.answered)
        think_s = workload.think_time_s()
        if workload.in_trace_session:
            self._follow_up = ticket._replace(t_sched=perf_counter() + think_s, index=None)
        if think_s > 0:  # a session's pause before its next turn (--think-time-s, a trace session's delay)
            gevent.sleep(think_s)


def _user_class(name: str, sent: Api, agent: bool) -> type[ApiUser]:
    """The built-in User class `name` of the API `sent` (abstract: a locustfile subclasses it); `agent`: it plays agent
    sessions."""
    how = "not streamed" if not sent.streams else "streamed" if sent.read_body is None else "streamed or not, as asked"
    doc = (
        f"Plays agent sessions over {sent.title} ({how}): a user prompt, then a step per answer with tool calls, the "
        "calls and their results sent back (`--tools`, `--max-agent-steps`; see `workload.agent`)."
        if agent
        else f"Sends {sent.title} ({how}), each request drawn from the workload (the command-line options)."
    )
    attributes = {"__module__": __name__, "__qualname__": name, "__doc__": doc, "abstract": True}
    return type(name, (ApiUser,), {**attributes, "endpoint": sent.endpoint, "agent": agent})


BUILT_IN_USERS = {
    name: _user_class(name, sent, agent)
    for sent in BUILT_IN
    for name, agent in ((sent.user, False), (sent.agent_user, True))
    if name
}
"""The built-in User classes by name, one per name an API's entry gives (`Api.user`, `Api.agent_user`):
`ChatCompletionsUser`, `ChatAgentUser`, ... — importable from here and from `llm_locust.users`."""
globals().update(BUILT_IN_USERS)
