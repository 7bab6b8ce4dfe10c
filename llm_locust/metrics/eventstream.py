"""Incremental decoder for AWS event-stream framing (`application/vnd.amazon.eventstream`), bytes in, messages out.

Pure, like `sse`: no sockets, no clock, no botocore. The caller passes the arrival time of each chunk of bytes and
every message carries the arrival time of the chunk that completed it — a message means nothing until its last
byte (and its checksum) is in.

A message (what botocore's `eventstream.EventStreamBuffer` reads, all integers big-endian):

    prelude   total length (uint32), headers length (uint32), prelude CRC32 (of the 8 bytes before it)
    headers   name length (uint8), name (UTF-8), value type (uint8), value (by type; strings: uint16 length)
    payload   total length - headers length - 16 bytes
    CRC32     of everything before it, the prelude included

A message may be split across chunks at any byte and one chunk may hold many. A bad checksum or length raises
`EventStreamError` (the stream cannot be resynchronised after it); a message longer than the decoder's bound
(`--max-event-bytes`) raises `sse.EventTooLarge` as soon as its prelude is in. A message cut by reads is kept as its
pieces and joined once all its bytes are in: the work is linear in the bytes read.
"""

from __future__ import annotations

import struct
from typing import NamedTuple
from zlib import crc32

from llm_locust.metrics.sse import DEFAULT_MAX_EVENT_BYTES, EventTooLarge

PRELUDE_BYTES = 12
_CRC_BYTES = 4
_MIN_MESSAGE_BYTES = PRELUDE_BYTES + _CRC_BYTES
MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # AWS's limit on one message (botocore's _MAX_PAYLOAD_LENGTH plus headers)
_MAX_HEADERS_BYTES = 128 * 1024  # AWS's limit on one message's headers

HeaderValue = bool | int | bytes | str
_FIXED = {2: ">b", 3: ">h", 4: ">i", 5: ">q", 8: ">q"}  # byte, short, integer, long, timestamp (ms)


class EventStreamError(ValueError):
    """The bytes are not a valid event stream (bad length or checksum, malformed headers)."""


class EventMessage(NamedTuple):
    """One decoded message: its payload, its `:event-type` (an exception's `:exception-type`; None without one),
    whether it is an exception (`:message-type` "exception" or "error"), every header, and its arrival time."""

    data: bytes
    event: str | None
    t: float
    exception: bool
    headers: dict[str, HeaderValue]


class EventStreamDecoder:
    """Turns stream chunks into `EventMessage`s: `feed` per chunk, `flush` at the end of the stream.

    The headers of a stream's messages repeat (one set per event type): each distinct headers block is parsed once
    and its dict shared, read-only, by the messages that carry it (at most `_KNOWN_HEADERS` kept)."""

    __slots__ = ("_known", "_max_bytes", "_needed", "_pending", "_pending_bytes")

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._max_bytes = min(max_event_bytes, MAX_MESSAGE_BYTES)
        self._pending: list[bytes] = []  # the pieces of the start of a message carried to the next chunk
        self._pending_bytes = 0
        self._needed = 0  # bytes pending before a message can be complete (its total length, once known)
        self._known: dict[bytes, tuple[str | None, bool, dict[str, HeaderValue]]] = {}

    @property
    def idle(self) -> bool:
        """True at a message boundary: no part of a message is pending."""
        return not self._pending

    def feed(self, chunk: bytes | bytearray, t: float) -> list[EventMessage]:
        """Decode `chunk` (arrived at time `t`); return the messages it completed, in order. Raises
        `EventStreamError` on a malformed message, `sse.EventTooLarge` on one longer than the bound."""
        if self._pending:
            self._pending.append(bytes(chunk))
            self._pending_bytes += len(chunk)
            if self._pending_bytes < self._needed:  # the message is not complete yet: kept, joined once it is
                return []
            data = b"".join(self._pending)
        else:
            data = bytes(chunk)
        messages: list[EventMessage] = []
        position, size = 0, len(data)
        needed = PRELUDE_BYTES
        while size - position >= PRELUDE_BYTES:
            total, headers_length = _prelude(data, position)
            if total > self._max_bytes:
                raise EventTooLarge(f"an event-stream message of {total:,} bytes", self._max_bytes)
            end = position + total
            if end > size:
                needed = total
                break
            (crc,) = _UINT32.unpack_from(data, end - _CRC_BYTES)
            if crc32(memoryview(data)[position : end - _CRC_BYTES]) != crc:
                raise EventStreamError("event stream message checksum mismatch")
            payload_start = position + PRELUDE_BYTES + headers_length
            block = data[position + PRELUDE_BYTES : payload_start]
            known = self._known.get(block)
            if known is None:
                known = _described(_headers(block, 0, headers_length))
                if len(self._known) < _KNOWN_HEADERS:
                    self._known[block] = known
            name, exception, headers = known
            messages.append(EventMessage(data[payload_start : end - _CRC_BYTES], name, t, exception, headers))
            position = end
        rest = data[position:] if position < size else b""
        self._pending, self._pending_bytes, self._needed = ([rest] if rest else []), len(rest), needed
        return messages

    def flush(self, t: float) -> list[EventMessage]:
        """End of stream: nothing is dispatched (a message cut short is no message); the rest is dropped."""
        self._pending, self._pending_bytes = [], 0
        return []


_UINT32 = struct.Struct(">I")
_PRELUDE = struct.Struct(">III")
_KNOWN_HEADERS = 64


def _prelude(data: bytes, start: int) -> tuple[int, int]:
    """(total length, headers length) of the message at `start`, its prelude checked."""
    total, headers_length, crc = _PRELUDE.unpack_from(data, start)
    if crc32(memoryview(data)[start : start + 8]) != crc:
        raise EventStreamError("event stream prelude checksum mismatch")
    if not _MIN_MESSAGE_BYTES <= total <= MAX_MESSAGE_BYTES:
        raise EventStreamError(f"event stream message length {total} out of range")
    if headers_length > min(_MAX_HEADERS_BYTES, total - _MIN_MESSAGE_BYTES):
        raise EventStreamError(f"event stream headers length {headers_length} out of range")
    return total, headers_length


def _described(headers: dict[str, HeaderValue]) -> tuple[str | None, bool, dict[str, HeaderValue]]:
    """(its name, whether it is an exception, `headers`) of a message with `headers`: an event's `:event-type`, an
    exception's `:exception-type`, an error's `:error-code`."""
    kind = headers.get(":message-type")
    named_by = ":exception-type" if kind == "exception" else ":error-code" if kind == "error" else ":event-type"
    name = headers.get(named_by)
    return (name if isinstance(name, str) else None), kind in ("exception", "error"), headers


def _headers(raw: bytes, position: int, end: int) -> dict[str, HeaderValue]:
    """The headers in `raw[position:end]`."""
    headers: dict[str, HeaderValue] = {}
    try:
        while position < end:
            length = raw[position]
            name = raw[position + 1 : position + 1 + length].decode()
            position += 1 + length
            kind = raw[position]
            position += 1
            value: HeaderValue
            if kind <= 1:  # boolean true, false: no value bytes
                value = kind == 0
            elif kind in _FIXED:
                (value,) = struct.unpack_from(_FIXED[kind], raw, position)
                position += struct.calcsize(_FIXED[kind])
            elif kind in (6, 7):  # byte array, string: uint16 length
                (size,) = struct.unpack_from(">H", raw, position)
                data = raw[position + 2 : position + 2 + size]
                value = data.decode() if kind == 7 else data
                position += 2 + size
            elif kind == 9:  # uuid
                value = raw[position : position + 16]
                position += 16
            else:
                raise EventStreamError(f"event stream header {name!r} has unknown type {kind}")
            headers[name] = value
    except (IndexError, struct.error, UnicodeDecodeError) as e:
        raise EventStreamError(f"event stream headers are malformed: {e}") from None
    if position != end:
        raise EventStreamError("event stream headers overrun their length")
    return headers
