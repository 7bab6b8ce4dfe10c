"""How a streamed API frames its events on the wire (`apis.Api.framing`): Server-Sent Events, or AWS event-stream
messages (Amazon Bedrock's own streaming API).

A `Framing` names the response's content type and the reader that applies a body's events to its record as its pieces
arrive (`reader(record, apply, keep, max_event_bytes)`, with `feed(data, t)` and `flush(t)`; `keep`, when given, gets
each event's payload for `stream_text.StreamText`; a line, event or message over `max_event_bytes` raises
`sse.EventTooLarge` from `feed`: the transport fails the request as a bad stream and closes its connection). Each event
reaches the API's applier with the arrival time of the piece of body that completed it — for SSE the piece that
completed its first data line, for an event-stream message its last byte —, the time `transport` takes for each read
(the kernel's receive time where there is one). Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from llm_locust.metrics.eventstream import EventStreamDecoder, EventStreamError
from llm_locust.metrics.protocol import EventStream
from llm_locust.metrics.record import ErrorKind, RequestRecord
from llm_locust.metrics.sse import DEFAULT_MAX_EVENT_BYTES


class StreamReader(Protocol):
    """One response body's events applied to its record, piece by piece."""

    def feed(self, data: bytes | bytearray, t: float) -> bool:
        """Apply the events completed by `data` (arrived at `t`, perf_counter s); True once the stream is over for
        the client. Raises `sse.EventTooLarge` over the reader's bound."""
        ...

    def flush(self, t: float) -> None:
        """The body ended at `t`."""
        ...


class MessageStream:
    """One event-stream body's messages applied to its record (`apply`: the API's, called with each
    `eventstream.EventMessage`); a malformed message (bad length or checksum) fails it as a bad stream. `keep` (when
    given) gets each message's payload before it is applied."""

    __slots__ = ("_apply", "_decoder", "_keep", "_record")

    def __init__(
        self,
        record: RequestRecord,
        apply: Callable[..., bool],
        keep: Callable[[bytes], None] | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        self._record = record
        self._apply = apply
        self._decoder = EventStreamDecoder(max_event_bytes)
        self._keep = keep

    def feed(self, data: bytes | bytearray, t: float) -> bool:
        """Apply the messages completed by `data` (arrived at `t`); True once the stream is over for the client."""
        record = self._record
        try:
            messages = self._decoder.feed(data, t)
        except EventStreamError as e:
            record.fail(ErrorKind.BAD_STREAM, str(e))
            return True
        apply, keep = self._apply, self._keep
        for message in messages:
            if keep is not None:
                keep(message.data)
            if apply(record, message, message.t, None):
                return True
        return False

    def flush(self, t: float) -> None:
        """The body ended at `t`: a message cut short is none (the record then lacks its end: `incomplete`)."""
        self._decoder.flush(t)


@dataclass(frozen=True)
class Framing:
    """A stream's framing: the `content_type` a 2xx response must have, and its `reader` (record, the API's event
    applier, where each event's payload is kept or None, the bound on an event's bytes) → `StreamReader`."""

    name: str
    content_type: str
    reader: Callable[[RequestRecord, Any, Any, int], StreamReader]


SSE = Framing("sse", "text/event-stream", EventStream)
"""Server-Sent Events (OpenAI, Anthropic, ...): the API's applier gets each event's data bytes."""
EVENTSTREAM = Framing("eventstream", "application/vnd.amazon.eventstream", MessageStream)
"""AWS event-stream messages (Bedrock's streaming API): the API's applier gets each `eventstream.EventMessage`."""
