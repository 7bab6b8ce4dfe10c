"""Incremental decoder for `text/event-stream` (Server-Sent Events), bytes in, events out.

Pure: it knows no sockets and no clock. The caller passes the arrival time of each chunk of
bytes (any float; the client uses `time.perf_counter()` seconds) and every event carries the
arrival time of the chunk that completed its first field line, i.e. when its data arrived.

Follows the WHATWG SSE parsing rules that matter for LLM endpoints: lines end in LF, CRLF or
CR; `data:` lines accumulate (joined by LF) until a blank line dispatches the event; one space
after the colon is dropped; lines starting with `:` are comments (keep-alives); `event:` sets
the event type; other fields (`id:`, `retry:`) are ignored. Lines and events may be split
across chunks at any byte, and one chunk may hold many events.

Bounded: a line still incomplete, or an event's data, beyond `max_event_bytes` raises `EventTooLarge` at once (a
stream that never sends a line ending must not grow a buffer without limit). A line cut by reads is joined to the next
read while short (`_LONG_LINE_BYTES`); a longer one is kept as its pieces and joined once, when its end arrives: the
work is linear in the bytes read.
"""

from __future__ import annotations

from typing import NamedTuple

DEFAULT_MAX_EVENT_BYTES = 4 * 1024 * 1024
"""The largest line or event a stream may send (`--max-event-bytes`): 4 MiB, 4x the simulator's huge chunk and ~1M
tokens of text — far beyond any token event or an API's closing event repeating the whole answer."""


_LONG_LINE_BYTES = 65536
"""A line cut by reads is joined to the next read while shorter than this (one copy of at most this many bytes, as
cheap as a list for the usual event cut in two); longer, it is kept as pieces until its end arrives."""


class EventTooLarge(ValueError):
    """A stream's line or event grew beyond its reader's bound (`--max-event-bytes`)."""

    def __init__(self, what: str, max_bytes: int) -> None:
        super().__init__(f"{what} over {max_bytes:,} bytes (--max-event-bytes)")


class SSEEvent(NamedTuple):
    """One dispatched event: its data payload, its type (None = "message") and arrival time."""

    data: bytes
    event: str | None
    t: float


class SSEDecoder:
    """Turns stream chunks into `SSEEvent`s. Call `feed` per chunk and `flush` at end of stream."""

    __slots__ = (
        "_data", "_data_bytes", "_event", "_max_bytes", "_partial", "_pending_cr", "_pieces", "_pieces_bytes",
        "_t_first",
    )  # fmt: skip

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._max_bytes = max_event_bytes
        self._partial = b""  # an incomplete line carried to the next chunk (of a long line: its first piece)
        self._pieces: list[bytes] = []  # a long line's further pieces, joined once its end arrives
        self._pieces_bytes = 0
        self._pending_cr = False  # the last chunk ended in CR: a following LF belongs to it
        self._data: list[bytes] = []
        self._data_bytes = 0  # the pending event's data, with the line feeds that will join it
        self._event: str | None = None
        self._t_first = 0.0

    @property
    def idle(self) -> bool:
        """True at an event boundary: nothing of a line or an event is pending."""
        return not (self._partial or self._data or self._pending_cr) and self._event is None

    def feed(self, chunk: bytes, t: float) -> list[SSEEvent]:
        """Decode `chunk` (arrived at time `t`); return the events it completed, in order. Raises `EventTooLarge`
        when an incomplete line or the pending event's data goes beyond the bound."""
        if self._pending_cr and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._pending_cr = chunk[-1:] == b"\r"
        partial = self._partial
        if partial:
            if len(partial) < _LONG_LINE_BYTES:  # the usual: an event cut by the read before
                chunk = partial + chunk
            elif b"\n" in chunk or b"\r" in chunk:  # a long line ends: its pieces joined once
                chunk = b"".join((partial, *self._pieces, chunk))
                self._pieces, self._pieces_bytes = [], 0
            else:  # a long line goes on: kept as a piece
                self._pieces_bytes += len(chunk)
                if len(partial) + self._pieces_bytes > self._max_bytes:
                    raise EventTooLarge("a line", self._max_bytes)
                self._pieces.append(chunk)
                return []
            self._partial = b""
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        events: list[SSEEvent] = []
        if not self._data and self._event is None:  # at an event boundary: whole events first
            blocks = chunk.split(b"\n\n")
            chunk = blocks.pop()  # what follows the last complete event
            for block in blocks:
                if block[:6] == b"data: " and b"\n" not in block:  # the usual event: one data line
                    events.append(SSEEvent(block[6:], None, t))
                else:
                    for line in (*block.split(b"\n"), b""):
                        event = self._line(line, t)
                        if event is not None:
                            events.append(event)
        lines = chunk.split(b"\n")
        rest = lines.pop()  # the text after the last line ending (b"" when complete)
        if len(rest) > self._max_bytes:
            raise EventTooLarge("a line", self._max_bytes)
        self._partial = rest
        for line in lines:
            event = self._line(line, t)
            if event is not None:
                events.append(event)
        return events

    def flush(self, t: float) -> list[SSEEvent]:
        """End of stream: dispatch a final event that was not followed by a blank line."""
        events: list[SSEEvent] = []
        if self._partial:
            event = self._line(b"".join((self._partial, *self._pieces)), t)
            self._partial, self._pieces, self._pieces_bytes = b"", [], 0
            if event is not None:
                events.append(event)
        event = self._line(b"", t)
        if event is not None:
            events.append(event)
        return events

    def _line(self, line: bytes, t: float) -> SSEEvent | None:
        """Process one line without its line ending; return an event when a blank line ends one."""
        if not line:
            if not self._data:
                self._event = None
                return None
            data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
            event = SSEEvent(data, self._event, self._t_first)
            self._data, self._data_bytes = [], 0
            self._event = None
            return event
        if line[0] == 0x3A:  # ":" comment / keep-alive
            return None
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            if not self._data:
                self._t_first = t
            self._data_bytes += len(value) + 1
            if self._data_bytes > self._max_bytes:
                raise EventTooLarge("an event", self._max_bytes)
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        return None
