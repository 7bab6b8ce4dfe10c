"""One request ready to send (`Prepared`), and what sends it (`Transport`): one `send(prepared)` for both clients.

The user builds a `Prepared` per request from its `workload.builder.RequestSpec`, its pacer ticket, its replica and
cancellation draw; its transport — `client.FastTransport` (Locust's FastHttp session, every event timestamped on
arrival) or `sdk_client.SdkTransport` (the openai SDK), chosen once per user — sends it, reads the answer as its
`Api` says (an SSE stream, or one JSON body), reports it to Locust and returns its `RequestRecord`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from llm_locust.apis import Api
from llm_locust.load.pacing import Ticket
from llm_locust.metrics.record import RequestRecord

if TYPE_CHECKING:
    from llm_locust.transport.cancel import Cancel
    from llm_locust.transport.replicas import Replica


@dataclass(frozen=True, slots=True)
class Prepared:
    """One request to send, with everything its transport needs that changes from request to request.

    `api`: its API (endpoint name on the record, streamed or not, reader); `path`: where it goes (the session's base
    URL or the replica's, plus this path) and its Locust row; `body`: the JSON body; `headers`: its own headers, sent
    on top of the transport's fixed ones (the session header, `--session-header`; empty otherwise); `ticket`: from
    the pacer (due time, sweep step, whether it counts); `replica`: one of several behind --host, with its
    credentials and breakdown; `cancel`: when this stream is to be closed early; `expected_prompt_tokens`: the
    client's count, if known (checked against the server's usage); `inputs`: the texts a request of an API that
    counts inputs carries (embeddings); `prefix_blocks`: its shared prompt blocks (whole, seen before); `model`: the
    model its body names (`RequestRecord.model`); `groups`: the breakdowns it counts in (`RequestRecord.groups`);
    `session` and `turn`: its session and 1-based turn in it (0: not a multi-turn session; the record counts in the
    "turn" breakdown otherwise); `keep_answer`: keep the generated text on the record (`RequestRecord.answer_text`,
    what the API's `event_text` reads from the stream; a session sends it back), at no cost when False; `on_finish`:
    called with the finished record just before it is reported (what only the stream's end tells goes on it: an
    agent session's step and, on its last request, the session's figures).
    """

    api: Api
    path: str
    body: bytes
    headers: Mapping[str, str]
    ticket: Ticket | None = None
    replica: Replica | None = None
    cancel: Cancel | None = None
    expected_prompt_tokens: int | None = None
    inputs: int = 1
    prefix_blocks: tuple[int, int] = (0, 0)
    model: str = ""
    groups: tuple[tuple[str, str], ...] = ()
    session: str = ""
    turn: int = 0
    keep_answer: bool = False
    on_finish: Callable[[RequestRecord], None] | None = None


class Transport(Protocol):
    """What sends a user's requests: `send` posts one, reads its answer to the end, reports it to Locust (the
    finished record in the request event's context) and returns its record."""

    def send(self, prepared: Prepared) -> RequestRecord:
        """Send `prepared`; its finished record."""
        ...
