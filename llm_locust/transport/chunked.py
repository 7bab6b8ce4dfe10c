"""HTTP/1.1 chunked transfer coding (RFC 9112 §7.1) de-framed in Python, for the pump's hot path.

A streamed completion is one HTTP chunk per token event: `<hex size>\r\n<data>\r\n`. Handing
each read to the response's HTTP parser (llhttp, from geventhttpclient) costs ~2.5 µs per event
in its Python callbacks (profile in benchmarks/RESULTS.md); taking the data chunks off here
costs a regex match and a slice.

The parser stays the authority: `ChunkedBody` takes over only where the parser stands exactly
at a chunk boundary, takes the data chunks, and hands everything from the last chunk (`0`) on —
or from the first byte it does not expect — back to the parser, which has then seen a body of
zero data chunks followed by those bytes: it completes the message (returning the connection
to the pool) or raises its parse error, exactly as if it had read the whole body itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_SIZE_LINE = re.compile(rb"([0-9A-Fa-f]{1,15})(?:;[^\r\n]*)?\r\n")
"""A chunk-size line: hex size, optional extensions (ignored), CRLF."""
_SIZE_LINE_START = re.compile(rb"[0-9A-Fa-f]{1,15}(?:;[^\r\n]*)?\r?")
"""The start of a chunk-size line, cut by the end of a read."""
_MAX_SIZE_LINE = 256  # bytes of a size line waited for before it is handed to the parser instead


class ChunkedBody:
    """Incremental de-framer of one chunked body (see the module doc); `feed` per read."""

    __slots__ = ("_left", "_partial")

    def __init__(self) -> None:
        self._partial = b""  # the start of a size line, waiting for its end
        self._left = 0  # bytes still to come of the current chunk's data and its CRLF (0: at a size line)

    def feed(self, data: bytes, on_piece: Callable[[bytes], object]) -> bytes | None:
        """De-frame `data` (the next bytes of the body): each chunk's data, or the part of it in
        `data`, goes to `on_piece`. Returns None while all of it was chunk framing or data; else
        the bytes from the last chunk or from an unexpected byte on, which are the HTTP
        parser's, as is everything after them (this object is then spent)."""
        if self._partial:
            data = self._partial + data
            self._partial = b""
        elif not self._left:  # the usual read: one whole chunk
            line = _SIZE_LINE.match(data)
            if line is not None:
                start = line.end()
                stop = start + int(line.group(1), 16)
                if stop + 2 == len(data) and start < stop and data.endswith(b"\r\n"):
                    on_piece(data[start:stop])
                    return None
        position, end = 0, len(data)
        while position < end:
            left = self._left
            if left > 2:  # chunk data
                stop = min(end, position + left - 2)
                on_piece(data[position:stop] if position or stop < end else data)
                self._left = left - (stop - position)
                position = stop
            elif left:  # the CRLF closing a chunk's data
                if end - position < left:
                    if data[position:] != b"\r\n"[2 - left : 2 - left + end - position]:
                        return data[position:]
                    self._left = left - (end - position)
                    return None
                if data[position : position + left] != b"\r\n"[2 - left :]:
                    return data[position:]
                position += left
                self._left = 0
            else:  # a size line
                line = _SIZE_LINE.match(data, position)
                if line is None:
                    rest = data[position:]
                    if len(rest) > _MAX_SIZE_LINE or _SIZE_LINE_START.fullmatch(rest) is None:
                        return rest
                    self._partial = rest  # wait for the rest of the line
                    return None
                size = int(line.group(1), 16)
                if size == 0:  # the last chunk: it, trailers and the end are the parser's
                    return data[position:]
                self._left = size + 2
                position = line.end()
        return None
