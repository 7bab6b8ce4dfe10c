"""A scenario's session of an API spoken over a WebSocket (`Api.turn`: the Realtime API), `self.llm.realtime.connect()`:
one socket, several turns, each measured and reported as one request.

    with self.llm.realtime.connect() as session:
        session.update(instructions="Answer briefly.")
        first = session.turn(text="Hello", max_output_tokens=64, name="greet")
        second = session.turn(text="And then?")

`turn(**fields)` sends the API's events for one answer (`Api.turn`: for the Realtime API a user message or audio, and
`response.create`; events carrying media are sent at real-time pace, `Api.pace`, their seconds the turn's `input_s`)
and reads the server's events until the answer is over, each with the kernel receive time of the read that brought it
(the process's stream pump, `transport.websocket`): time to first delta (from the hand-over of `response.create`), the
gaps between deltas and the turn's latency are its record's TTFT, ITL and E2E. `name=`, `catch_response=` and
`score=` as every call on `self.llm` (`llm_client.LLMClient.create`); a task's first turn takes the task's arrival (an
open loop's due time), its later turns go at once, in the same step. `send(event)` sends any other client event, not
measured. Opening the socket raises what connecting raised
(`transport.websocket.HandshakeRefused`: the server's HTTP answer, e.g. 401).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote
from uuid import uuid4

from llm_locust.apis import api
from llm_locust.errors import ConfigError
from llm_locust.metrics.request import RequestSpec
from llm_locust.metrics.scoring import Reference

if TYPE_CHECKING:
    from llm_locust.apis import Api
    from llm_locust.load.pacing import Ticket
    from llm_locust.metrics.record import RequestRecord
    from llm_locust.runtime.answer import Answer
    from llm_locust.transport.websocket import Opener, WebSocket

_NAME = "name"  # the breakdown of named calls (`llm_client.NAME_DIMENSION`)


class LLMClient(Protocol):
    """What a session reaches of its user's `llm_client.LLMClient`."""

    sockets: Opener | None

    @property
    def model(self) -> str: ...

    def path(self, endpoint: str) -> str: ...

    def reference(self, scorer: Any, headers: Mapping[str, str] | None) -> Reference | None: ...

    def arrival_ticket(self) -> Ticket: ...

    def exchange(
        self, sent: Api, socket: WebSocket, events: list[dict[str, Any]], spec: RequestSpec, ticket: Ticket, name: str
    ) -> RequestRecord: ...

    def answer(self, record: RequestRecord, row: str, scorer: Any, catch_response: bool) -> Answer: ...


class Connect:
    """A WebSocket API's mount on `self.llm` (`realtime.connect`): opens a `SocketSession`."""

    __slots__ = ("_client", "_endpoint")

    def __init__(self, client: LLMClient, endpoint: str) -> None:
        self._client = client
        self._endpoint = endpoint

    def __call__(self, *, model: str | None = None, headers: Mapping[str, str] | None = None) -> SocketSession:
        """Open a session with `model` (default: the run's), its upgrade request carrying `headers` too."""
        return SocketSession(self._client, self._endpoint, model or self._client.model, headers or {})

    def __repr__(self) -> str:
        return f"<self.llm.{api(self._endpoint).mount}: {api(self._endpoint).title}>"


class SocketSession:
    """One session on one WebSocket (see the module doc); a context manager that closes it."""

    def __init__(self, client: LLMClient, endpoint: str, model: str, headers: Mapping[str, str]) -> None:
        if client.sockets is None:
            raise ConfigError(f"{endpoint}: this user opens no WebSocket (a scenario user's self.llm does)")
        self._client, self._api, self.model = client, api(endpoint), model
        self.path = client.path(endpoint)
        client.reference(None, headers)  # its values redacted like --header values
        self._socket = client.sockets.open(f"{self.path}?model={quote(model)}", headers)
        self.id, self.turns = uuid4().hex, 0  # its records' session and turns (the "turn" breakdown)

    def send(self, event: dict[str, Any]) -> None:
        """Send one client event (a JSON object), not measured."""
        self._socket.send(event)

    def update(self, **session: Any) -> None:
        """Send `session.update` with the `session` fields given (the Realtime API's: `instructions`,
        `max_output_tokens`, ...), not measured; the server's `session.updated` is read with the next turn's events."""
        self.send({"type": "session.update", "session": {"type": "realtime", **session}})

    def turn(
        self,
        *,
        name: str | None = None,
        catch_response: bool = False,
        score: Callable[[Answer], Any] | Reference | None = None,
        **fields: Any,
    ) -> Answer:
        """One measured turn: the API's events for `fields` (the Realtime API: `text=`, the user's message;
        `max_output_tokens=`), the answer read to its end; its `Answer` (see the module doc)."""
        client, sent = self._client, self._api
        reference = client.reference(score, None)
        ticket = client.arrival_ticket()
        groups = ((_NAME, name),) if name else ()
        self.turns += 1
        events = sent.turn(fields)  # type: ignore[misc]
        media_s = sum(map(sent.pace, events)) if sent.pace is not None else 0.0
        spec = RequestSpec(b"", None, session=self.id, turn=self.turns, model=self.model, groups=groups,
                           reference=reference, input_s=media_s)  # fmt: skip
        row = name or self.path
        record = client.exchange(sent, self._socket, events, spec, ticket, row)
        return client.answer(record, row, score, catch_response)

    def close(self) -> None:
        """Close the socket (a close frame first)."""
        self._socket.close()

    def __enter__(self) -> SocketSession:
        return self

    def __exit__(self, *_exc: tuple[type[BaseException] | None, BaseException | None, TracebackType | None]) -> None:
        self.close()
