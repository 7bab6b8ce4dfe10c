"""The fast client (`FastTransport`): one prepared request over Locust's FastHttp session, a stream timestamped
event by event.

The body comes from `byte_arrival.body_chunks` as soon as bytes are in (Locust's `iter_content` /
`iter_lines` wait for 1 KiB and batch events by up to ~100 ms), each piece with its arrival
time — the kernel's receive time where available — taken before any decoding. Transport
errors become `ErrorKind`s here, at the boundary.

The request goes through the session with `catch_response` — Locust's response context, which reports only when a
`with` block exits — and no `with`: the transport reports nothing; it returns the finished `RequestRecord`, which its
caller reports (`runtime.route.report`, the one place for both clients).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from functools import partial
from time import perf_counter
from typing import Any

import orjson
from geventhttpclient.response import HTTPConnectionClosed

from llm_locust.metrics.framing import StreamReader
from llm_locust.metrics.protocol import error_text, finish
from llm_locust.metrics.record import ErrorKind, RequestRecord
from llm_locust.metrics.request import JSON
from llm_locust.metrics.sse import DEFAULT_MAX_EVENT_BYTES, EventTooLarge
from llm_locust.metrics.stream_text import StreamText, TokenCounter, keep_text
from llm_locust.transport import patches, pump
from llm_locust.transport.auth import RequestAuth
from llm_locust.transport.byte_arrival import body_chunks, take_bytes
from llm_locust.transport.cancel import Cancel, StreamCancelled
from llm_locust.transport.pump import BodyCallback
from llm_locust.transport.redirects import is_redirect, redirect_reason
from llm_locust.transport.request import NextSend, Prepared
from llm_locust.transport.timeouts import RequestTimeout, TimeoutWatchdog, Watch
from llm_locust.transport.tls import tls_problem
from llm_locust.transport.tls_memory import TLSConnection

REQUEST_ID_HEADERS = ("x-request-id", "x-amzn-requestid")
"""The response headers whose value is the record's `server_request_id` (OpenAI sends the first, vLLM with
`--enable-request-id-headers`, many gateways; AWS the second, Bedrock's own streaming API carries no id); without them
the response's own `id` is taken."""


class FastTransport:
    """One user's requests through Locust's FastHttp session (`session`, the user's `client`): `send(prepared)`
    posts a request with the user's fixed `headers` (content type, auth, provider's, --header) and its own, reads
    its answer as its `Api` says — a stream (SSE, or AWS event-stream: the API's framing) timestamped event by event,
    or one JSON body — and returns its record. `auth` (Bedrock's SigV4 signer, or a process's bearer token,
    `tokens.BearerAuth`): the headers it computes for each request, over its final URL and body, as it is sent, on top
    of the fixed ones.

    `watchdog` enforces the first-token, read and whole-request timeouts (`RequestTimeout` is raised into the
    user's greenlet while it waits for bytes). `counter` (--tokenizer), or a request that asks for its answer
    (`RequestSpec.keep_answer`): the stream's reader keeps each event's payload as it decodes it (`StreamText`), and
    the generated text is decoded once, after the stream — counted (`record.local_output_tokens`, checked against
    the server's usage), kept (`record.answer_text`), or both. A stream's line or event over `max_event_bytes`
    (`--max-event-bytes`) fails its request as a bad stream at once, its connection closed. `next_send_s`: the
    process's next send due, by which the stream pump ends its turns (`pump.turn_end`; the wiring's
    `load.due_sends.SENDS.next_s`).
    """

    def __init__(
        self,
        session: Any,
        headers: dict[str, str],
        watchdog: TimeoutWatchdog,
        counter: TokenCounter | None = None,
        auth: RequestAuth | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        next_send_s: NextSend = pump.no_sends,
    ) -> None:
        self.session = session
        self.headers = headers
        self.watchdog = watchdog
        self.counter = counter
        self.auth = auth
        self.max_event_bytes = max_event_bytes
        self.next_send_s = next_send_s

    def send(self, prepared: Prepared) -> RequestRecord:
        """Send `prepared`, read its answer to the end; return its finished record."""
        if prepared.api.streams and prepared.spec.streamed:
            return self._stream(prepared)
        return self._post_json(prepared)

    def _post(self, prepared: Prepared) -> Callable[[], Any]:
        """The call that posts `prepared` through the session (to its replica, with its credentials, if any; with the
        headers of the transport's `auth`, computed now), Locust's `catch_response` context as its result (never
        entered: it reports nothing), its body not read yet (`stream`: read as it arrives, streamed or not)."""
        headers = {**self.headers, **prepared.headers} if prepared.headers else self.headers
        if prepared.spec.content_type != JSON:  # a body not JSON (multipart: its boundary is the request's own)
            headers = {**headers, "Content-Type": prepared.spec.content_type}
        path, replica = prepared.path, prepared.replica
        url, auth = (path, None) if replica is None else (replica.url + path, replica.auth)
        if self.auth is not None:  # signed now, over the final URL and body (`auth.RequestAuth`)
            final_url = url if replica is not None else self.session.base_url + path
            headers = {**headers, **self.auth.headers("POST", final_url, prepared.spec.body)}
        return partial(self.session.post, url, data=prepared.spec.body, headers=headers, catch_response=True, name=path,
                       stream=True, **({"auth": auth} if auth else {}))  # fmt: skip

    def _stream(self, prepared: Prepared) -> RequestRecord:
        """POST a request of a streamed API, read its SSE stream to the end (`prepared.cancel`: closed early when
        it says); return its finished record."""
        watchdog, counter, cancel, keep_answer = self.watchdog, self.counter, prepared.cancel, prepared.spec.keep_answer
        post = self._post(prepared)
        record = prepared.record
        api = prepared.api
        kept = (
            StreamText(api.event_text, api.answer_parts if keep_answer else None)  # type: ignore[arg-type]
            if (counter is not None or keep_answer) and api.event_text is not None
            else None
        )
        watch = watchdog.start(record)
        try:
            resp = _post_noting_connection(record, post, prepared.wait_due, cancel)
            record.status_code = resp.status_code or 0
            if _check_response(resp, record, api.framing.content_type):
                raw = resp._response  # geventhttpclient's response, read by arrival.body_chunks
                try:
                    keep = None if kept is None else kept.keep
                    reader = api.framing.reader(record, api.parser, keep, self.max_event_bytes)
                    _read_events(raw, record, reader, watch, cancel, self.next_send_s)
                except StreamCancelled:  # closing the connection below tells the server
                    record.cancelled = True
                except EventTooLarge as e:  # read no further: the connection is closed below
                    record.fail(ErrorKind.BAD_STREAM, str(e))
                except OSError as e:  # RequestTimeout and ssl.SSLError included
                    record.fail(*_transport_failure(e))
                except Exception as e:  # geventhttpclient's HTTPParseError / HTTPConnectionClosed
                    record.fail(ErrorKind.TRANSPORT, f"{type(e).__name__}: {e}")
                finally:
                    raw.release()  # closes the connection unless the body was read to its end
            _stop(watchdog, watch, cancel)  # from here on nothing may be thrown into the caller's reporting
            finish(record, perf_counter())
            if kept is not None:
                keep_text(record, kept.text(), counter, keep_answer, kept.answer())
        finally:
            _stop(watchdog, watch, cancel)  # also when the user is stopped mid-request
        return record

    def _post_json(self, prepared: Prepared) -> RequestRecord:
        """POST a request of a non-streamed API (embeddings) carrying `RequestSpec.inputs` inputs, read its JSON
        response with the API's body reader (`Api.read_body`); return its finished record.

        Not streamed: the request's latency is E2E (`t_last` = `t_done`, the arrival of the body's last byte, the
        kernel's receive time as a stream's events', so a busy loop does not lengthen it), it has no first token
        (`t_first` None: the first-token timeout does not apply). It fails when the response is not 2xx or the
        reader refuses its body (embeddings: not JSON, or another number of embeddings than `inputs`).
        """
        watchdog = self.watchdog
        post = self._post(prepared)
        record = prepared.record
        watch = watchdog.start(record, first_token=False)
        try:
            resp = _post_noting_connection(record, post, prepared.wait_due)
            record.status_code = resp.status_code or 0
            content, t_body = b"", perf_counter()
            if _check_status(resp, record):
                raw = resp._response
                try:
                    content, t_body = _read_whole_body(raw, watch, self.next_send_s, record.t_headers)
                except OSError as e:  # RequestTimeout and ssl.SSLError included
                    record.fail(*_transport_failure(e))
                except Exception as e:  # geventhttpclient's HTTPParseError / HTTPConnectionClosed
                    record.fail(ErrorKind.TRANSPORT, f"{type(e).__name__}: {e}")
                finally:
                    raw.release()
            watchdog.end(watch)
            if record.ok:
                prepared.api.read_body(content, record, prepared.spec.inputs)  # type: ignore[misc]
            record.t_done = t_body
            if record.ok:
                record.t_last = record.t_done
        finally:
            watchdog.end(watch)
        return record


def _post_noting_connection(
    record: RequestRecord,
    post: Callable[[], Any],
    wait_due: Callable[[], None] | None,
    cancel: Cancel | None = None,
) -> Any:
    """Send the request: `post()` (through Locust's session, `catch_response`: its response context, not entered,
    so not reported). Once the session has assembled it, right before it takes a connection
    (`patches.before_checkout`), it waits for its due time (`wait_due`, an open loop's), then takes `t_send` and starts
    its cancellation's timer: only taking the connection and writing are left after the due time. Sent once more, on
    a new connection, when it went on a reused connection that the server had closed before any byte of the response
    (a stale kept-alive connection: `record.retried_stale`; never once a byte of the response arrived); the first
    attempt's time stays in the request's (`t_send` is the first attempt's). Notes the connection on `record`: new or
    reused, a new one's connect and TLS handshake times, when its last byte was handed to the kernel (`t_uploaded`),
    and the arrival of the response head, `t_headers`; and the server's request
    id, from its `x-request-id` (AWS: `x-amzn-RequestId`) header."""

    def leave() -> None:
        if wait_due is not None:
            wait_due()
        record.t_send = perf_counter()
        if cancel is not None:
            cancel.start()

    patches.take_checked_out()  # left by an earlier request of this greenlet (e.g. the model lookup)
    with patches.before_checkout(leave):
        resp = post()
    connection = patches.take_checked_out()
    if connection is not None and connection.requests > 1 and _closed_before_response(resp):
        record.retried_stale = True
        with patches.fresh_connection():
            resp = post()
        connection = patches.take_checked_out()
    if connection is not None:
        record.new_connection = connection.requests == 1
        if record.new_connection:
            record.connect_s = connection.connect_s
            # (not getattr: a closed gevent socket raises OSError for any attribute it lacks)
            record.tls_handshake_s = connection.tls_handshake_s if isinstance(connection, TLSConnection) else None
        if connection.t_sent_s >= record.t_send:  # this request's own send (not the connection's previous one)
            record.t_uploaded = connection.t_sent_s
        if resp.status_code:  # its head was read (its body not yet): the connection's last read completed it
            record.t_headers = connection.t_arrival_s or None
    request_id = None
    if resp.status_code and resp.headers:
        request_id = resp.headers.get(REQUEST_ID_HEADERS[0]) or resp.headers.get(REQUEST_ID_HEADERS[1])
    if request_id:
        record.server_request_id = request_id
    return resp


def _closed_before_response(resp: Any) -> bool:
    """True when `resp` (Locust's response) is the failure of a connection closed before any byte of a response:
    geventhttpclient's `HTTPConnectionClosed` from the head's first read (reset or end of input there)."""
    error = getattr(resp, "error", None)
    if error is None or resp.status_code:
        return False
    original = getattr(error, "original", None)  # RetriesExceeded(url, 0, original=the real error)
    return isinstance(original if isinstance(original, BaseException) else error, HTTPConnectionClosed)


def _stop(watchdog: TimeoutWatchdog, watch: Watch, cancel: Cancel | None) -> None:
    """End the request's timeouts and cancellation timer."""
    watchdog.end(watch)
    if cancel is not None:
        cancel.stop()


def _check_response(resp: Any, record: RequestRecord, expected: str) -> bool:
    """True when `resp` is a 2xx stream of content type `expected` (the API's framing: text/event-stream, ...), not
    encoded (the client asks for `Accept-Encoding: identity`); otherwise mark `record` failed and return False."""
    if not _check_status(resp, record):
        return False
    headers = resp.headers
    content_type = (headers.get("content-type") or "") if headers else ""
    if not content_type.startswith(expected):
        record.fail(ErrorKind.BAD_STREAM, f"expected {expected}, got {content_type or 'no content type'}")
        return False
    encoding = headers.get("content-encoding") or "identity"
    encoding = (encoding if isinstance(encoding, str) else ",".join(encoding)).strip().lower()
    if encoding != "identity":
        shown = error_text(encoding)[:40]
        record.fail(ErrorKind.BAD_STREAM, f"the stream is {shown}-encoded, not asked for (Accept-Encoding: identity)")
        return False
    return True


def _check_status(resp: Any, record: RequestRecord) -> bool:
    """True when `resp` came with a 2xx status; otherwise mark `record` failed and return False."""
    error = getattr(resp, "error", None)
    if error is not None and not resp.status_code:
        if isinstance(getattr(error, "original", None) or error, StreamCancelled):  # before the response head
            record.cancelled = True
            return False
        record.fail(*_transport_failure(error, getattr(resp.request, "url", "")))
        return False
    status = resp.status_code
    if is_redirect(status):
        record.fail(ErrorKind.REDIRECT, redirect_reason(status, resp.headers.get("location") if resp.headers else None))
        return False
    if not 200 <= status < 300:
        retry_after = resp.headers.get("retry-after") if status == 429 and resp.headers else None
        after = f" (Retry-After: {retry_after} s; not retried)" if retry_after else ""
        record.fail(status_kind(status), f"HTTP {status}{after}: {_error_body(resp)}")
        return False
    return True


def status_kind(status: int) -> ErrorKind:
    """The failure kind of a non-2xx, non-3xx HTTP status."""
    return ErrorKind.HTTP_429 if status == 429 else ErrorKind.HTTP_4XX if status < 500 else ErrorKind.HTTP_5XX


def _read_events(
    raw: Any, record: RequestRecord, events: StreamReader, watch: Watch, cancel: Cancel | None, next_send_s: NextSend
) -> None:
    """Read the stream to its end, `events` (the API's framing's reader: SSE events, event-stream messages) applying
    each event to `record` with its arrival time.

    On Linux the process's `StreamPump` reads the body (one greenlet for every stream, plain TCP
    and TLS); otherwise this greenlet reads it with `byte_arrival.body_chunks`. Raises
    `StreamCancelled` once a stream to be cancelled after N tokens has them.
    """
    on_body = events.feed
    if cancel is not None and cancel.after_tokens:
        on_body = _token_limit(on_body, record, cancel.after_tokens)

    if pump.available(raw):
        body = raw._body_buffer  # what arrived together with the headers
        done = on_body(take_bytes(body), record.t_headers or perf_counter()) if body else False
        if not raw.message_complete:
            pump.pump(next_send_s).read(raw, on_body, watch, done)
        if record.saw_done or not record.ok:  # [DONE], an error object or a bad chunk ended it
            return
    else:  # (also a response whole with its head: its connection went back to the pool)
        chunks = body_chunks(raw, record.t_headers)
        for data, t in chunks:
            watch.t_active_s = t  # data arrived: what the read timeout measures from
            if on_body(data, t):
                if record.ok:  # [DONE]: read the rest of the body so the connection is reused
                    for _data, t_rest in chunks:
                        watch.t_active_s = t_rest
                return
    events.flush(perf_counter())  # a last event without its blank line


def _read_whole_body(raw: Any, watch: Watch, next_send_s: NextSend, t_head_s: float | None) -> tuple[bytes, float]:
    """Read a response's body to its end as `_read_events` reads a stream (the `StreamPump` on Linux); the body and
    the arrival of its last piece (the kernel's receive time where there is one; what came with the head arrived at
    `t_head_s`, the read that ended it)."""
    pieces: list[bytes] = []
    t_last = t_head_s or perf_counter()

    def on_body(data: bytes | bytearray, t: float) -> bool:
        nonlocal t_last
        pieces.append(bytes(data))
        t_last = t
        return False

    if pump.available(raw):
        body = raw._body_buffer  # what arrived together with the headers
        if body:
            on_body(take_bytes(body), t_last)
        if not raw.message_complete:
            pump.pump(next_send_s).read(raw, on_body, watch, False)
    else:  # (also a body whole with its head: its connection went back to the pool)
        for data, t in body_chunks(raw, t_head_s):
            watch.t_active_s = t
            on_body(data, t)
    return b"".join(pieces), t_last


def _token_limit(feed: BodyCallback, record: RequestRecord, after_tokens: int) -> BodyCallback:
    """`feed`, raising `StreamCancelled` once `record` has `after_tokens` token events and the stream goes on."""

    def on_body(data: bytes | bytearray, t: float) -> bool:
        done = feed(data, t)
        if not done and record.events >= after_tokens:
            raise StreamCancelled(f"cancelled after {record.events} token events (--cancel-after-tokens)")
        return done

    return on_body


def _transport_failure(error: BaseException, url: str = "") -> tuple[ErrorKind, str]:
    """Classify a connection-level exception (unwrapping geventhttpclient's RetriesExceeded) of a
    request to `url` (named when its TLS is set up wrong: `tls.tls_problem`)."""
    problem = tls_problem(url, error) if url else None
    if problem is not None:
        return ErrorKind.TLS, problem
    original = getattr(error, "original", None)  # RetriesExceeded(url, 0, original=the real error)
    if isinstance(original, BaseException):
        error = original
    text = f"{type(error).__name__}: {error}"
    if isinstance(error, RequestTimeout):  # the watchdog: first-token, read or whole-request timeout
        return ErrorKind.TIMEOUT, str(error)
    if isinstance(error, ConnectionRefusedError | socket.gaierror | TimeoutError | patches.ProxyError):
        return ErrorKind.CONNECT, text  # a socket timeout can only be the connect timeout (reads have none)
    return ErrorKind.TRANSPORT, text


def _error_body(resp: Any) -> str:
    """The server's error message from a non-2xx response (OpenAI-style JSON or plain text)."""
    try:
        raw = resp.content or b""  # geventhttpclient has read and cached it on the bad status
    except Exception:  # the body could not be read: the status code says enough
        return "(no body)"
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return error_text(raw) or "(no body)"
    return error_text(data.get("error", data) if isinstance(data, dict) else data)
