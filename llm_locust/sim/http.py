"""A minimal, incremental HTTP/1.1 request parser and response framing (pure: no sockets).

Enough HTTP for load tests: request line + headers + a Content-Length body, keep-alive, pipelining, `Expect:
100-continue`. Request bodies with Transfer-Encoding are refused (411); a request with neither header has no body
(`curl -X POST`).
"""

from __future__ import annotations

from http import HTTPStatus

MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024


class HttpError(Exception):
    """A request that cannot be parsed; answer with `status` and close the connection."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Request:
    """One parsed request: method, path (without query), query string, headers (lower-case names)."""

    __slots__ = ("body", "headers", "keep_alive", "method", "path", "query", "t_body_s", "version")

    def __init__(self, method: str, target: str, version: str, headers: dict[str, str]) -> None:
        self.method = method
        self.path, _, self.query = target.partition("?")
        self.version = version
        self.headers = headers
        connection = headers.get("connection", "").lower()
        if version == "HTTP/1.1":
            self.keep_alive = "close" not in connection
        else:
            self.keep_alive = "keep-alive" in connection
        self.body = b""
        self.t_body_s = 0.0  # when its last byte arrived (perf_counter s; set by the connection that read it)


class RequestParser:
    """Feed bytes as they arrive; get back the requests they complete, in order."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pending: Request | None = None
        self._body_bytes = 0
        self.awaiting_continue = False
        """Set when a request asked for `100 Continue` and its body has not arrived yet."""

    @property
    def idle(self) -> bool:
        """True between requests: no byte of the next one has arrived."""
        return self._pending is None and not self._buf

    def feed(self, data: bytes) -> list[Request]:
        """Consume `data`; return the requests completed by it. Raises HttpError."""
        buf = self._buf
        buf += data
        done: list[Request] = []
        while True:
            if self._pending is None:
                if buf[:1] and not buf[:1].isalpha():  # not a method: a TLS handshake, say (servers answer 400 at once)
                    raise HttpError(400, f"malformed request line {bytes(buf[:16])!r}")
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(buf) > MAX_HEAD_BYTES:
                        raise HttpError(431, "request head too large")
                    break
                self._pending, self._body_bytes = _parse_head(bytes(buf[:end]))
                del buf[: end + 4]
                expect = self._pending.headers.get("expect", "").lower()
                if expect == "100-continue" and len(buf) < self._body_bytes:
                    self.awaiting_continue = True
            if len(buf) < self._body_bytes:
                break
            request = self._pending
            request.body = bytes(buf[: self._body_bytes])
            del buf[: self._body_bytes]
            self._pending = None
            done.append(request)
        return done


def _parse_head(head: bytes) -> tuple[Request, int]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise HttpError(400, f"malformed request line {lines[0][:100]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon:
            raise HttpError(400, f"malformed header line {line[:100]!r}")
        headers[name.strip().lower()] = value.strip()
    request = Request(parts[0], parts[1], parts[2], headers)
    if "transfer-encoding" in headers:
        raise HttpError(411, "request bodies must have a Content-Length (no Transfer-Encoding)")
    length_text = headers.get("content-length")
    if length_text is None:  # neither Content-Length nor Transfer-Encoding: no body (RFC 9112 6.3), also for a POST
        return request, 0
    if not length_text.isdigit():
        raise HttpError(400, f"bad Content-Length {length_text!r}")
    length = int(length_text)
    if length > MAX_BODY_BYTES:
        raise HttpError(413, "request body too large")
    return request, length


def response_head(
    status: int, content_type: str, *, content_length: int | None, keep_alive: bool, extra: tuple[str, ...] = ()
) -> bytes:
    """Return the status line and headers; `content_length=None` means a chunked body.

    `extra` holds further complete header lines, e.g. ("Retry-After: 1",).
    """
    lines = [
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
        "Server: llm-locust-sim",
        f"Content-Type: {content_type}",
        "Transfer-Encoding: chunked" if content_length is None else f"Content-Length: {content_length}",
    ]
    if content_type == "text/event-stream":
        lines.append("Cache-Control: no-cache")
    if not keep_alive:
        lines.append("Connection: close")
    lines.extend(extra)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def chunk(payload: bytes) -> bytes:
    """Return `payload` framed as one HTTP/1.1 chunk (never pass an empty payload)."""
    return b"%x\r\n%b\r\n" % (len(payload), payload)


LAST_CHUNK = b"0\r\n\r\n"
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
