"""Incremental decoder for `text/event-stream` (Server-Sent Events), bytes in, events out.

Pure: it knows no sockets and no clock. The caller passes the arrival time of each chunk of
bytes (any float; the client uses `time.perf_counter()` seconds) and every event carries the
arrival time of the chunk that completed its first field line, i.e. when its data arrived.

Follows the WHATWG SSE parsing rules that matter for LLM endpoints: lines end in LF, CRLF or
CR; `data:` lines accumulate (joined by LF) until a blank line dispatches the event; one space
after the colon is dropped; lines starting with `:` are comments (keep-alives); `event:` sets
the event type; other fields (`id:`, `retry:`) are ignored. Lines and events may be split
across chunks at any byte, and one chunk may hold many events.
"""

from __future__ import annotations

from typing import NamedTuple


class SSEEvent(NamedTuple):
    """One dispatched event: its data payload, its type (None = "message") and arrival time."""

    data: bytes
    event: str | None
    t: float


class SSEDecoder:
    """Turns stream chunks into `SSEEvent`s. Call `feed` per chunk and `flush` at end of stream."""

    __slots__ = ("_data", "_event", "_partial", "_pending_cr", "_t_first")

    def __init__(self) -> None:
        self._partial = b""  # an incomplete line carried to the next chunk
        self._pending_cr = False  # the last chunk ended in CR: a following LF belongs to it
        self._data: list[bytes] = []
        self._event: str | None = None
        self._t_first = 0.0

    @property
    def idle(self) -> bool:
        """True at an event boundary: nothing of a line or an event is pending."""
        return not (self._partial or self._data or self._pending_cr) and self._event is None

    def feed(self, chunk: bytes, t: float) -> list[SSEEvent]:
        """Decode `chunk` (arrived at time `t`); return the events it completed, in order."""
        if self._pending_cr and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._pending_cr = chunk[-1:] == b"\r"
        if self._partial:
            chunk = self._partial + chunk
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
        self._partial = lines.pop()  # the text after the last line ending (b"" when complete)
        for line in lines:
            event = self._line(line, t)
            if event is not None:
                events.append(event)
        return events

    def flush(self, t: float) -> list[SSEEvent]:
        """End of stream: dispatch a final event that was not followed by a blank line."""
        events: list[SSEEvent] = []
        if self._partial:
            event = self._line(self._partial, t)
            self._partial = b""
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
            self._data = []
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
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        return None
