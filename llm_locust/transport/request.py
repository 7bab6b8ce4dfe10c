"""One request ready to send (`Prepared`), and what sends it (`Transport`): one `send(prepared)` for both clients.

A `Prepared` carries the request's record, opened by the caller (`metrics.record.open_record`), which holds its
facts (its `metrics.request.RequestSpec`, by reference), and what only the sender knows: its API and path, its own
headers, its replica and cancellation draw, the wait for its due time. The user's transport —
`client.FastTransport` (Locust's FastHttp session, every event timestamped on arrival) or `sdk_client.SdkTransport`
(the openai SDK), chosen once per user — sends it, reads the answer onto its record as its `Api` says (an SSE
stream, or one JSON body) and returns the finished `RequestRecord`; it neither reports the request to Locust nor
tells the workload (the caller does both, once: `runtime.llm_client`). It knows nothing of the workload, the load or
the wiring: what it needs of them reaches it as values (`wait_due`, a `metrics.stream_text.TokenCounter`, the
process's next send due).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from llm_locust.apis import Api
from llm_locust.metrics.record import RequestRecord
from llm_locust.metrics.request import RequestSpec

if TYPE_CHECKING:
    from llm_locust.transport.cancel import Cancel
    from llm_locust.transport.replicas import Replica

NextSend = Callable[[float], float | None]
"""The process's next send due after a perf_counter instant (perf_counter s; None: none due): what the stream pump
ends its turn by (`load.due_sends.DueSends.next_s`, handed in by the wiring)."""


@dataclass(frozen=True, slots=True)
class Prepared:
    """One request to send: `record`, its record opened by the caller (`open_record`: the transport takes its `t_send`
    again as it leaves and reads the answer onto it), which holds its facts (`spec`: body, expected prompt tokens,
    shared blocks, session and turn, model, breakdowns, whether its answer is kept), and what the sender adds.

    `api`: its API (endpoint name on the record, streamed or not, reader); `path`: where it goes (the session's base
    URL or the replica's, plus this path); `headers`: its own headers, sent on top of the transport's fixed ones (the
    session header, `--session-header`, a scenario's per-call headers; empty otherwise); `replica`: one of several
    behind --host, with its credentials; `cancel`: when this stream is to be closed early; `wait_due`: waits for the
    request's due time (the pacer's), called by the transport as late as it can, right before the request leaves (the
    fast client: once the HTTP client has assembled the request, before it takes a connection; `t_send` is taken then).
    """

    api: Api
    path: str
    record: RequestRecord
    headers: Mapping[str, str]
    replica: Replica | None = None
    cancel: Cancel | None = None
    wait_due: Callable[[], None] | None = None

    @property
    def spec(self) -> RequestSpec:
        """The request's facts, as its call made them (its record's)."""
        return self.record.spec


class Transport(Protocol):
    """What sends a user's requests: `send` posts one, reads its answer onto its record to the end and returns the
    finished record (not reported: the caller reports it)."""

    def send(self, prepared: Prepared) -> RequestRecord:
        """Send `prepared`; its finished record."""
        ...
