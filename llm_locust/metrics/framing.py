"""How a streamed API frames its events on the wire (`apis.Api.framing`): Server-Sent Events, or AWS event-stream
messages (Bedrock's ConverseStream).

A `Framing` names the response's content type, the reader that applies a body's events to its record as its pieces
arrive (`reader(record, apply)`, with `feed(data, t)` and `flush(t)`), and the plain decoder of its events for
`stream_text.StreamText`. Each event reaches the API's applier with the arrival time of the piece of body that
completed it — for SSE the piece that completed its first data line, for an event-stream message its last byte —,
the time `transport` takes for each read (the kernel's receive time where there is one). Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from llm_locust.metrics.eventstream import EventStreamDecoder, EventStreamError
from llm_locust.metrics.protocol import EventStream
from llm_locust.metrics.record import ErrorKind, RequestRecord
from llm_locust.metrics.sse import SSEDecoder


class StreamReader(Protocol):
    """One response body's events applied to its record, piece by piece."""

    def feed(self, data: bytes | bytearray, t: float) -> bool:
        """Apply the events completed by `data` (arrived at `t`, perf_counter s); True once the stream is over for
        the client."""
        ...

    def flush(self, t: float) -> None:
        """The body ended at `t`."""
        ...


class Decoder(Protocol):
    """A framing's plain decoder: events with a `data` payload (`sse.SSEEvent`, `eventstream.EventMessage`)."""

    def feed(self, chunk: bytes | bytearray, t: float) -> list[Any]: ...
    def flush(self, t: float) -> list[Any]: ...


class MessageStream:
    """One event-stream body's messages applied to its record (`apply`: the API's, called with each
    `eventstream.EventMessage`); a malformed message (bad length or checksum) fails it as a bad stream."""

    __slots__ = ("_apply", "_decoder", "_record")

    def __init__(self, record: RequestRecord, apply: Callable[..., bool]) -> None:
        self._record = record
        self._apply = apply
        self._decoder = EventStreamDecoder()

    def feed(self, data: bytes | bytearray, t: float) -> bool:
        """Apply the messages completed by `data` (arrived at `t`); True once the stream is over for the client."""
        record = self._record
        try:
            messages = self._decoder.feed(data, t)
        except EventStreamError as e:
            record.fail(ErrorKind.BAD_STREAM, str(e))
            return True
        apply = self._apply
        for message in messages:  # noqa: SIM110 (as protocol.EventStream)
            if apply(record, message, message.t, None):
                return True
        return False

    def flush(self, t: float) -> None:
        """The body ended at `t`: a message cut short is none (the record then lacks its end: `incomplete`)."""
        self._decoder.flush(t)


@dataclass(frozen=True)
class Framing:
    """A stream's framing: the `content_type` a 2xx response must have, its `reader` (record, the API's event
    applier) → `StreamReader`, and its plain `decoder` (for `--tokenizer` and kept answers)."""

    name: str
    content_type: str
    reader: Callable[[RequestRecord, Any], StreamReader]
    decoder: Callable[[], Decoder]


SSE = Framing("sse", "text/event-stream", EventStream, SSEDecoder)
"""Server-Sent Events (OpenAI, Anthropic, ...): the API's applier gets each event's data bytes."""
EVENTSTREAM = Framing("eventstream", "application/vnd.amazon.eventstream", MessageStream, EventStreamDecoder)
"""AWS event-stream messages (Bedrock's ConverseStream): the API's applier gets each `eventstream.EventMessage`."""
