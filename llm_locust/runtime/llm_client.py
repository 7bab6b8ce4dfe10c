"""The scenario client (`LLMClient`, a user's `self.llm`): one call per API inside a Locust task, measured like the
built-in users' requests — it is their route too.

    answer = self.llm.chat.completions.create(messages=[{"role": "user", "content": "Hi"}], name="greet")
    answer.text, answer.ttft_s, answer.record

Shaped like the APIs' SDKs — each API's call at the name its SDK gives it (`Api.mount`): the openai SDK's
(`chat.completions.create`, `completions`, `responses`, `embeddings`), the anthropic SDK's (`messages.create`), Google's
genai SDK's (`models.generate_content_stream`, its body fields as the REST API spells them) —, so that an application's
call moves into a task by changing its receiver: body fields are keyword arguments (`model` defaults to the run's), made
into the body as a built-in user's is (`workload.body.request_body`: `--extra-body` merged deep, the API's streaming
fields); `name=` is the Locust stats row (default: the API's path) and a `name` breakdown; `headers=` go with this
request only (their values redacted like `--header` values); `catch_response=True` returns the answer as a context
manager with `success()` / `failure(reason)` (Locust's idiom: a failure is an error of kind `check`); `score=` scores
the answer — a callable given the `Answer` (a bool, or a number in [0, 1]) or a `scoring.Reference` — into the run's
accuracy (a score is a measurement: a wrong answer is no failure).
Streamed APIs stream (`stream=False` is refused: the measurements are the stream's). The answer's types:
`runtime.answer`.

Every request — a scenario's and a built-in user's (`users.ApiUser`) — takes one route: `send` (the transport
returns the finished record: TTFT, ITL, E2E, usage, tool calls, the kept text; a request with a reference gets its
answer's score, here, after the stream was read), then the answer is heard once (the built-in user's workload; a
scenario's code, from the returned `Answer`), then `route.report` reports it to Locust with the record in the event's
context, where the metrics take it.

Arrivals (`--request-rate`, open loop): one run of a task is one arrival. Its first call waits for the user's ticket
from the pacer (due time, sweep step); the task's later calls go at once, as a session's later turns do, and count
in the same step. The run ends when Locust asks the user's `wait_time` for the pause after the task.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from gevent import GreenletExit

from llm_locust.apis import APIS, Api, api
from llm_locust.load.backoff import Backoff
from llm_locust.load.pacing import Ticket
from llm_locust.metrics.record import RequestRecord, open_record
from llm_locust.metrics.request import RequestSpec
from llm_locust.metrics.scoring import Reference, checked_score, reference_problem, score
from llm_locust.metrics.stream_text import StreamText, keep_text
from llm_locust.redact import register_call_value
from llm_locust.runtime.answer import Answer, CheckedAnswer
from llm_locust.runtime.route import report
from llm_locust.runtime.socket_session import Connect
from llm_locust.transport.cancel import Canceller
from llm_locust.transport.replicas import ReplicaSet
from llm_locust.transport.request import Prepared, Transport
from llm_locust.workload.body import request_body
from llm_locust.workload.providers import check_api, completion_path, model_path

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from llm_locust.config.settings import Settings
    from llm_locust.load.clock import RunClock
    from llm_locust.load.due_sends import DueSends
    from llm_locust.load.pacing import Plan
    from llm_locust.transport.timeouts import TimeoutWatchdog
    from llm_locust.transport.websocket import Opener, WebSocket
    from llm_locust.workload.prefix_pool import PrefixPool
    from llm_locust.workload.traces import Trace

NAME_DIMENSION = "name"
"""The breakdown of a scenario's named requests (`name=`): summary.json `breakdowns.name`, one group per name."""


class Pacing(Protocol):
    """What a user reaches of its process's pacer (`pacer.Pacer`): its tickets, the wait for a ticket's due time, its
    current plan, and the due times of the sends its users hold (`sends`)."""

    plan: Plan
    sends: DueSends

    def take(self, new_session: bool = False) -> Ticket: ...
    def until_due(self, ticket: Ticket) -> None: ...
    def forget(self, ticket: Ticket) -> None: ...
    def yield_to_sends(self) -> None: ...


class UserContext(Protocol):
    """All a user reaches of its process's state (`users_part.UsersPart`, from `plugin.user_context`): the test's
    settings and trace, the pacer, the run's clock, the shared prefix pool, replicas and model, the timeout watchdog,
    whether a request of the test succeeded, and the back-off's accounting. Nothing of the lead's part (control,
    results, merging)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def trace(self) -> Trace | None: ...
    @property
    def worker_index(self) -> int: ...

    pacer: Pacing
    clock: RunClock
    prefix_pool: PrefixPool | None
    watchdog: TimeoutWatchdog | None
    model: str
    succeeded: bool

    def replicas(self, host: str) -> ReplicaSet: ...
    def resolve_model(self, fetch: Callable[[], str]) -> str: ...
    def hold_if_stopping(self, arrival: bool = False) -> None: ...
    def cutting(self, record: RequestRecord) -> AbstractContextManager[None]: ...
    def back_off(self, pause_s: float, record: RequestRecord) -> None: ...


class _Call:
    """One API's call on `self.llm`, at its `Api.mount` (`self.llm.chat.completions.create(...)`)."""

    __slots__ = ("_client", "_endpoint")

    def __init__(self, client: LLMClient, endpoint: str) -> None:
        self._client = client
        self._endpoint = endpoint

    def __call__(
        self,
        *,
        name: str | None = None,
        headers: Mapping[str, str] | None = None,
        catch_response: bool = False,
        score: Callable[[Answer], Any] | Reference | None = None,
        **fields: Any,
    ) -> Any:
        """Send one request of this API with the body `fields` (keyword arguments, as the SDK takes them; `model`
        defaults to the run's and goes where the API takes it, in the body or the path; `--extra-body` merged deep and
        the API's streaming fields added: `body.request_body`) and read its answer to the end.

        `name`: its Locust stats row and its label in the `name` breakdown (default: the API's path, no breakdown);
        `headers`: sent with this request only; `catch_response`: return a `CheckedAnswer` to judge in a `with`
        block, reported when it ends (else the `Answer`, reported already); `score`: how to score a successful answer
        into the run's accuracy — a callable given the `Answer` that returns a bool or a number in [0, 1] (ValueError
        otherwise, raised after the request was reported unscored), or a `scoring.Reference` (ValueError before
        sending when it cannot score: a bad regex or schema). ValueError for `stream=False` to an API that only streams.
        """
        return self._client.create(self._endpoint, fields, name, headers, catch_response, score)

    def __repr__(self) -> str:
        return f"<self.llm.{api(self._endpoint).mount}: {api(self._endpoint).title}>"


class _Calls:
    """A level of the calls' names on `self.llm` (`chat`, `chat.completions`, `models`: as the SDKs name them)."""


def _mount(client: LLMClient, call: _Call, mount: str) -> None:
    """Put `call` on `client` at the dotted path `mount` (`Api.mount`), making the levels it needs; ValueError when a
    level is the client's own attribute (`model`, `send`, ...)."""
    *levels, last = mount.split(".")
    at: Any = client
    for level in levels:
        below = vars(at).get(level)
        if below is None:
            if hasattr(type(at), level):  # (the class's: a property is not read)
                raise ValueError(f"self.llm.{mount}: {level!r} is the client's own")
            below = _Calls()
            setattr(at, level, below)
        at = below
    if last in vars(at) or hasattr(type(at), last):
        raise ValueError(f"self.llm.{mount}: {last!r} is taken")
    setattr(at, last, call)


class LLMClient:
    """A user's LLM client (`self.llm`): every registered API's call at the name its SDK gives it (`Api.mount`:
    `chat.completions.create(...)`, `messages.create(...)`, `models.generate_content_stream(...)`, ...;
    docs/scenarios.md lists them); `model`, the run's model; `settings`, the run's settings (read-only).

    Built by `users.LLMUser` with the user's `transport` (fast client or openai SDK), `replicas`, `canceller`, the
    process's users part (`state`, a `UserContext`) and Locust's `events`; `context` is the user's Locust context
    (`User.context`).
    """

    def __init__(
        self,
        state: UserContext,
        transport: Transport,
        replicas: ReplicaSet,
        canceller: Canceller,
        events: Any,
        context: Any,
        first_model: Any,
        sockets: Opener | None = None,
    ) -> None:
        self._state, self.sockets = state, sockets  # sockets: a WebSocket API's sessions' (`socket_session`)
        self._transport, self._replicas, self._canceller = transport, replicas, canceller
        self._events, self._context, self._first_model = events, context, first_model
        self._model = ""
        self._ticket: Ticket | None = None  # the arrival the running task holds (None: the next call takes one)
        self._backoff = Backoff(state.settings.load.backoff_max_s, random.Random())  # after failures without an answer
        self._pause: tuple[float, RequestRecord | None] = (0.0, None)  # the pause due, after that request
        self._paths: dict[str, str] = {}
        for registered in APIS.values():
            call = _Call if registered.turn is None else Connect  # a WebSocket API's mount opens a session
            _mount(self, call(self, registered.endpoint), registered.mount)

    @property
    def settings(self) -> Settings:
        """The run's settings (the command-line options)."""
        return self._state.settings

    @property
    def model(self) -> str:
        """The run's model: --model, else the deployment (Azure, Databricks), else the first model the server lists
        (asked once per process)."""
        if not self._model:
            state = self._state
            self._model = state.model or state.settings.endpoint.deployment or state.resolve_model(self._first_model)
        return self._model

    def path(self, endpoint: str) -> str:
        """Where requests of `endpoint` go, for the run's provider; ConfigError when the provider does not serve it
        or `--client openai-sdk` cannot send it (`providers.check_api`)."""
        path = self._paths.get(endpoint)
        if path is None:
            point = self._state.settings.endpoint
            # ConfigError naming the fix when the provider or the client cannot send this API
            check_api(point.provider, point.server_family, endpoint, False, point.client)
            path = self._paths[endpoint] = completion_path(
                point.provider,
                endpoint,
                point.deployment,
                point.api_version,
                point.vertex_project,
                point.vertex_location,
            )
        return path

    def take_ticket(self, new_session: bool = False) -> Ticket:
        """Wait until this user may send a request that begins an arrival (`new_session`: one that begins a session,
        what `--max-sessions` counts); its ticket. None once the test began to stop its users (`hold_if_stopping`)."""
        self._state.hold_if_stopping(arrival=True)
        return self._state.pacer.take(new_session=new_session)

    @property
    def step(self) -> Any:
        """The load plan's current sweep step (`pacing.Plan.step`: its lengths, if a length sweep)."""
        return self._state.pacer.plan.step

    def send(
        self, sent: Api, path: str, spec: RequestSpec, headers: Mapping[str, str], ticket: Ticket, name: str
    ) -> RequestRecord:
        """Send one request — `spec` of API `sent` to `path` (its `{model}`, if any, the request's model), with its own
        `headers`, under `ticket` — to a replica, with its cancellation draw, when the ticket is due (everything else is
        ready by then) — never once the test began to stop its users (`UserContext.hold_if_stopping`); its finished
        record (not reported yet: `report`), its answer scored when the spec has a reference and the request
        succeeded (`scoring.score`). A user stopped while its ended request waits for a gap between the other users'
        sends reports it under `name` before it stops: the server answered it, so it is counted."""
        cancel = self._canceller.draw() if sent.streams and spec.streamed else None
        sent_to = model_path(path, spec.model)  # an API whose path names the model (Api.path's {model})
        try:
            self._state.hold_if_stopping()  # (nothing yields from here to the write, but an open loop's due wait)
            with self._replicas.use() as replica:
                wait_due = None if ticket.t_sched is None else partial(self._leave_on_time, ticket)  # an open loop's
                groups = () if replica is None else replica.groups
                record = open_record(sent.endpoint, spec, ticket, groups)
                prepared = Prepared(sent, sent_to, record, headers, replica, cancel, wait_due)
                with self._state.cutting(record):  # waits for the due time right before the request leaves
                    record = self._transport.send(prepared)
        finally:
            self._state.pacer.forget(ticket)  # (had the request failed before it could leave)
        return self._ended(record, name)

    def exchange(
        self, sent: Api, socket: WebSocket, events: list[dict[str, Any]], spec: RequestSpec, ticket: Ticket, name: str
    ) -> RequestRecord:
        """`send` for a WebSocket session's turn (`socket_session`): `events` on `socket` when the ticket is due."""
        kept = StreamText(sent.event_text, sent.answer_parts)  # type: ignore[arg-type]  # the answer, for the scenario
        try:
            self._state.hold_if_stopping()
            if ticket.t_sched is not None:  # an open loop's
                self._leave_on_time(ticket)
            record = open_record(sent.endpoint, spec, ticket)
            with self._state.cutting(record):
                socket.exchange(events, record, sent.parser, self._state.watchdog, kept.keep, sent.pace)  # type: ignore[arg-type]
        finally:
            self._state.pacer.forget(ticket)
        keep_text(record, kept.text(), None, True, kept.answer())
        return self._ended(record, name)

    def _ended(self, record: RequestRecord, name: str) -> RequestRecord:
        """A request just ended: a gap between the other users' sends (`name`: its row), then its reference's score."""
        try:
            self._state.pacer.yield_to_sends()  # its end and report wait for a gap between the other users' sends
        except GreenletExit:  # the runner stopped this user meanwhile
            self.report(name, record)
            raise
        if record.reference is not None and record.ok:  # the record is closed: scoring costs the stream nothing
            record.score = score(record.reference, record.content_text or "")
        return record

    def _leave_on_time(self, ticket: Ticket) -> None:
        """An open loop's last moment before its request leaves: wait until `ticket` is due, then send it unless the
        test began to stop its users meanwhile (`UserContext.hold_if_stopping`)."""
        self._state.pacer.until_due(ticket)
        self._state.hold_if_stopping()

    def request(
        self,
        sent: Api,
        path: str,
        spec: RequestSpec,
        headers: Mapping[str, str],
        ticket: Ticket,
        answered: Callable[[RequestRecord], None],
    ) -> RequestRecord:
        """One request from start to end: `send` it, let `answered` hear of its finished record (once, before the
        report: what it adds to the record is reported with it), `report` it under `path`; its record."""
        record = self.send(sent, path, spec, headers, ticket, path)
        answered(record)
        self.report(path, record)
        return record

    def report(self, name: str, record: RequestRecord) -> None:
        """Report the finished `record` to Locust under `name` (`route.report`); the pause it asks for, if it failed
        without an answer (`load.backoff`), is due at the end of the task (`end_arrival`)."""
        report(self._events, name, record, self._context(), self._state.clock)
        self._pause = (self._backoff.after(record, self._state.succeeded), record)

    def end_arrival(self) -> None:
        """The running task ended (Locust asks for the user's wait time, in its waiting state): the next call begins
        a new arrival. A user whose last request failed without an answer pauses here first (`load.backoff`; counted
        by `UserContext.back_off`): a stop ends the pause at once."""
        self._ticket = None
        (pause_s, record), self._pause = self._pause, (0.0, None)
        if record is not None:
            self._state.back_off(pause_s, record)

    def create(
        self,
        endpoint: str,
        fields: dict[str, Any],
        name: str | None,
        headers: Mapping[str, str] | None,
        catch_response: bool,
        scorer: Callable[[Answer], Any] | Reference | None = None,
    ) -> Answer:
        """One scenario call of `endpoint` (see `_Call`)."""
        sent = api(endpoint)
        if sent.streams and sent.read_body is None and fields.get("stream", True) is False:
            raise ValueError(f"{sent.title}: stream=False is not measured; llm-locust reads the stream")
        reference = self.reference(scorer, headers)
        ticket = self.arrival_ticket()
        own = dict(fields)
        model = str(own.pop("model", None) or self.model)  # in the body, or only in the path (Api.model_field "")
        body = request_body(sent, own, model, self._state.settings.workload.extra_body)
        inputs = body.get(sent.inputs_field)
        count = len(inputs) if not sent.counts_outputs and isinstance(inputs, list) else 1
        path = self.path(endpoint)
        groups = ((NAME_DIMENSION, name),) if name else ()
        data, content_type = sent.encode_body(body)
        streamed = sent.streams_body(body)
        keep = streamed and sent.event_text is not None
        spec = RequestSpec(data, None, inputs=count, keep_answer=keep, model=model, groups=groups, reference=reference,
                           content_type=content_type, streamed=streamed, input_s=sent.input_s(body))  # fmt: skip
        row = name or path
        record = self.send(sent, path, spec, headers or {}, ticket, row)
        return self.answer(record, row, scorer, catch_response)

    def reference(
        self, scorer: Callable[[Answer], Any] | Reference | None, headers: Mapping[str, str] | None
    ) -> Reference | None:
        """A call's `score=` if a `scoring.Reference` (ValueError: it cannot score); `headers`' values redacted."""
        reference = scorer if isinstance(scorer, Reference) else None
        problem = None if reference is None else reference_problem(reference)
        if problem:
            raise ValueError(f"score=Reference(...): {problem}")
        for value in (headers or {}).values():
            register_call_value(value)
        return reference

    def arrival_ticket(self) -> Ticket:
        """A call's ticket: the running task's first call takes the arrival's (waiting for the pacer); a later one goes
        at once, in the arrival's step."""
        if self._ticket is None:
            self._ticket = self.take_ticket(new_session=True)
            return self._ticket
        return self._ticket._replace(t_sched=None, index=None)

    def answer(
        self, record: RequestRecord, row: str, scorer: Callable[[Answer], Any] | Reference | None, catch_response: bool
    ) -> Answer:
        """A call's finished `record` as its `Answer` in the stats row `row`: scored by a callable `scorer` and reported
        now — or, `catch_response`, a `CheckedAnswer` reported when its `with` block ends."""
        if callable(scorer) and record.ok:
            try:
                record.score = checked_score(scorer(Answer(record, row)))
            except Exception:
                self.report(row, record)  # measured all the same; the scorer's error is the scenario's own
                raise
        if catch_response:
            return CheckedAnswer(record, row, self.report)
        self.report(row, record)
        return Answer(record, row)
