"""The fast client (`FastTransport`): one prepared request over Locust's FastHttp session, a stream timestamped
event by event.

The body comes from `byte_arrival.body_chunks` as soon as bytes are in (Locust's `iter_content` /
`iter_lines` wait for 1 KiB and batch events by up to ~100 ms), each piece with its arrival
time — the kernel's receive time where available — taken before any decoding. Transport
errors become `ErrorKind`s here, at the boundary.

Reporting: the HTTP request is reported to Locust through `catch_response`, with the
end-to-end latency (not time-to-headers) as its response time, the output tokens as its
response length, the failure kind in its exception, and the finished `RequestRecord` in its
context under `RECORD_KEY` — the plugin's request listener takes it from there.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from functools import partial
from time import perf_counter
from typing import Any

import orjson
from geventhttpclient.response import HTTPConnectionClosed

from llm_locust.apis import api
from llm_locust.metrics.protocol import EventApplier, EventStream, error_text, finish
from llm_locust.metrics.record import ErrorKind, RequestRecord, reuse_group, turn_group
from llm_locust.metrics.stream_text import StreamText
from llm_locust.transport import patches, pump
from llm_locust.transport.byte_arrival import body_chunks, take_bytes
from llm_locust.transport.cancel import Cancel, StreamCancelled
from llm_locust.transport.pump import BodyCallback
from llm_locust.transport.request import Prepared
from llm_locust.transport.timeouts import RequestTimeout, TimeoutWatchdog, Watch
from llm_locust.transport.tls import tls_problem
from llm_locust.transport.tls_memory import TLSConnection
from llm_locust.workload.tokens import TokenCounter

RECORD_KEY = "llm_record"
"""Key of the `RequestRecord` in the context of the HTTP request event."""
REQUEST_ID_HEADER = "x-request-id"
"""The response header whose value is the record's `server_request_id` (OpenAI sends it, vLLM with
`--enable-request-id-headers`, many gateways); without it the response's own `id` is taken."""


class RequestFailure(Exception):
    """The exception Locust shows for a failed request: "<kind>: <message>"."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


class FastTransport:
    """One user's requests through Locust's FastHttp session (`session`, the user's `client`): `send(prepared)`
    posts a request with the user's fixed `headers` (content type, auth, provider's, --header) and its own, reads
    its answer as its `Api` says — an SSE stream timestamped event by event, or one JSON body — and reports it.

    `watchdog` enforces the first-token, read and whole-request timeouts (`RequestTimeout` is raised into the
    user's greenlet while it waits for bytes). `counter` (--tokenizer), or a request that asks for its answer
    (`Prepared.keep_answer`): a stream's body is kept as it arrives (`StreamText`) and its generated text decoded
    once, at the end — counted (`record.local_output_tokens`, checked against the server's usage), kept
    (`record.answer_text`), or both.
    """

    def __init__(
        self, session: Any, headers: dict[str, str], watchdog: TimeoutWatchdog, counter: TokenCounter | None = None
    ) -> None:
        self.session = session
        self.headers = headers
        self.watchdog = watchdog
        self.counter = counter

    def send(self, prepared: Prepared) -> RequestRecord:
        """Send `prepared`, read its answer to the end, report it; return its record."""
        if prepared.api.streams:
            return self._stream(prepared)
        return self._post_json(prepared)

    def _post(self, prepared: Prepared, streamed: bool) -> Callable[[], Any]:
        """The call that posts `prepared` through the session (to its replica, with its credentials, if any),
        Locust's `catch_response` context as its result."""
        headers = {**self.headers, **prepared.headers} if prepared.headers else self.headers
        path, replica = prepared.path, prepared.replica
        url, auth = (path, None) if replica is None else (replica.url + path, replica.auth)
        return partial(self.session.post, url, data=prepared.body, headers=headers, catch_response=True, name=path,
                       **({"stream": True} if streamed else {}), **({"auth": auth} if auth else {}))  # fmt: skip

    def _stream(self, prepared: Prepared) -> RequestRecord:
        """POST a request of a streamed API, read its SSE stream to the end (`prepared.cancel`: closed early when
        it says), report it; return its record."""
        watchdog, counter, cancel = self.watchdog, self.counter, prepared.cancel
        post = self._post(prepared, streamed=True)
        record = new_record(prepared)
        kept = StreamText(prepared.api.event_text) if counter is not None or prepared.keep_answer else None
        watch = watchdog.start(record)
        if cancel is not None:
            cancel.start()
        try:
            with _post_noting_connection(record, post) as resp:
                record.status_code = resp.status_code or 0
                if _check_response(resp, record):
                    raw = resp._response  # geventhttpclient's response, read by arrival.body_chunks
                    try:
                        _read_events(raw, record, prepared.api.parser, watch, kept, cancel)  # type: ignore[arg-type]
                    except StreamCancelled:  # closing the connection below tells the server
                        record.cancelled = True
                    except OSError as e:  # RequestTimeout and ssl.SSLError included
                        record.fail(*_transport_failure(e))
                    except Exception as e:  # geventhttpclient's HTTPParseError / HTTPConnectionClosed
                        record.fail(ErrorKind.TRANSPORT, f"{type(e).__name__}: {e}")
                    finally:
                        raw.release()  # closes the connection unless the body was read to its end
                _stop(watchdog, watch, cancel)  # from here on nothing may be thrown into the reporting listeners
                finish(record, perf_counter())
                if kept is not None:
                    keep_text(record, kept.text(), counter, prepared.keep_answer)
                if prepared.on_finish is not None:
                    prepared.on_finish(record)
                _report(resp, record)
        finally:
            _stop(watchdog, watch, cancel)  # also when the user is stopped mid-request
        return record

    def _post_json(self, prepared: Prepared) -> RequestRecord:
        """POST a request of a non-streamed API (embeddings) carrying `prepared.inputs` inputs, read its JSON
        response with the API's body reader (`Api.read_body`), report it; return its record.

        Not streamed: the request's latency is E2E (`t_last` = `t_done`, when the whole body is in), it has no first
        token (`t_first` None: the first-token timeout does not apply). It fails when the response is not 2xx or the
        reader refuses its body (embeddings: not JSON, or another number of embeddings than `inputs`).
        """
        watchdog = self.watchdog
        post = self._post(prepared, streamed=False)
        record = new_record(prepared)
        watch = watchdog.start(record, first_token=False)
        try:
            with _post_noting_connection(record, post, streamed=False) as resp:
                t_body = perf_counter()  # the whole body is in (not streamed: read before post returns)
                record.status_code = resp.status_code or 0
                if _check_status(resp, record):
                    prepared.api.read_body(resp.content or b"", record, prepared.inputs)  # type: ignore[misc]
                watchdog.end(watch)
                record.t_done = t_body
                if record.ok:
                    record.t_last = record.t_done
                _report(resp, record)
        finally:
            watchdog.end(watch)
        return record


def _post_noting_connection(record: RequestRecord, post: Callable[[], Any], streamed: bool = True) -> Any:
    """Send the request: `post()` (through Locust's session, `catch_response`: its response context, reported when
    the caller's `with` ends). Sent once more, on a new connection, when it went on a reused connection that the
    server had closed before any byte of the response (a stale kept-alive connection: `record.retried_stale`;
    never once a byte of the response arrived); the first attempt is not reported, its time stays in the request's
    (`t_send` is the first attempt's). Notes the connection on `record`: new or reused, a new one's connect and TLS
    handshake times, and (`streamed`: the body is not read yet) the arrival of the response head, `t_headers`; and
    the server's request id, from its `x-request-id` header."""
    patches.take_checked_out()  # left by an earlier request of this greenlet (e.g. the model lookup)
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
        if streamed and resp.status_code:  # its head was read: the connection's last read completed it
            record.t_headers = connection.t_arrival_s or None
    request_id = resp.headers.get(REQUEST_ID_HEADER) if resp.status_code and resp.headers else None
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


def keep_text(record: RequestRecord, text: str, counter: TokenCounter | None, keep_answer: bool) -> None:
    """Put a finished stream's generated `text` on `record`: its tokens counted by `counter` (--tokenizer) when the
    request succeeded, the text itself as `answer_text` when `keep_answer` (also of a failed or cancelled stream:
    what arrived)."""
    if counter is not None and record.ok:
        record.local_output_tokens = counter.count(text)
    if keep_answer:
        record.answer_text = text


def _stop(watchdog: TimeoutWatchdog, watch: Watch, cancel: Cancel | None) -> None:
    """End the request's timeouts and cancellation timer."""
    watchdog.end(watch)
    if cancel is not None:
        cancel.stop()


def new_record(prepared: Prepared) -> RequestRecord:
    """The record of `prepared`, being sent now (perf_counter), with what its pacer's ticket says, its shared
    prompt blocks (whole blocks, of which seen before; it then counts in the "reuse" breakdown too), its replica's
    breakdown, its model and its own breakdowns (`Prepared.groups`), its session and turn (a multi-turn session's turn
    counts in the "turn" breakdown too)."""
    prefix_blocks, ticket = prepared.prefix_blocks, prepared.ticket
    record = RequestRecord(
        endpoint=prepared.api.endpoint, t_send=perf_counter(), expected_prompt_tokens=prepared.expected_prompt_tokens
    )
    record.prefix_blocks, record.prefix_blocks_seen = prefix_blocks
    record.model = prepared.model
    record.groups += prepared.groups
    if prefix_blocks[0]:
        record.groups += (reuse_group(*prefix_blocks),)
    if prepared.replica is not None:
        record.groups += prepared.replica.groups
    if prepared.turn:
        record.groups += (turn_group(prepared.turn),)
    record.session, record.turn = prepared.session, prepared.turn
    if ticket is not None:
        record.t_sched, record.step, record.measured = ticket.t_sched, ticket.step, ticket.measured
    return record


def _check_response(resp: Any, record: RequestRecord) -> bool:
    """True when `resp` is a 2xx SSE stream; otherwise mark `record` failed and return False."""
    if not _check_status(resp, record):
        return False
    content_type = (resp.headers.get("content-type") or "") if resp.headers else ""
    if not content_type.startswith("text/event-stream"):
        record.fail(ErrorKind.BAD_STREAM, f"expected text/event-stream, got {content_type or 'no content type'}")
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
    if not 200 <= status < 300:
        retry_after = resp.headers.get("retry-after") if status == 429 and resp.headers else None
        after = f" (Retry-After: {retry_after} s; not retried)" if retry_after else ""
        record.fail(status_kind(status), f"HTTP {status}{after}: {_error_body(resp)}")
        return False
    return True


def status_kind(status: int) -> ErrorKind:
    """The failure kind of a non-2xx HTTP status."""
    return ErrorKind.HTTP_429 if status == 429 else ErrorKind.HTTP_4XX if status < 500 else ErrorKind.HTTP_5XX


def _read_events(
    raw: Any, record: RequestRecord, parser: EventApplier, watch: Watch, kept: StreamText | None, cancel: Cancel | None
) -> None:
    """Read the SSE stream to its end, applying each event to `record` with its arrival time (`parser`: the API's);
    each piece of body also goes to `kept` unless it is None.

    On Linux the process's `StreamPump` reads the body (one greenlet for every stream, plain TCP
    and TLS); otherwise this greenlet reads it with `byte_arrival.body_chunks`. Raises
    `StreamCancelled` once a stream to be cancelled after N tokens has them.
    """
    events = EventStream(record, parser)
    on_body = events.feed if kept is None else _keeping(events.feed, kept)
    if cancel is not None and cancel.after_tokens:
        on_body = _token_limit(on_body, record, cancel.after_tokens)

    if pump.available(raw):
        body = raw._body_buffer  # what arrived together with the headers
        t_head = getattr(raw._sock, "t_arrival_s", None) or perf_counter()  # the read that ended the head
        done = on_body(take_bytes(body), t_head) if body else False
        if not raw.message_complete:
            pump.pump().read(raw, on_body, watch, done)
        if record.saw_done or not record.ok:  # [DONE], an error object or a bad chunk ended it
            return
    else:
        chunks = body_chunks(raw)
        for data, t in chunks:
            watch.t_active_s = t  # data arrived: what the read timeout measures from
            if on_body(data, t):
                if record.ok:  # [DONE]: read the rest of the body so the connection is reused
                    for _data, t_rest in chunks:
                        watch.t_active_s = t_rest
                return
    events.flush(perf_counter())  # a last event without its blank line


def _token_limit(feed: BodyCallback, record: RequestRecord, after_tokens: int) -> BodyCallback:
    """`feed`, raising `StreamCancelled` once `record` has `after_tokens` token events and the stream goes on."""

    def on_body(data: bytes | bytearray, t: float) -> bool:
        done = feed(data, t)
        if not done and record.events >= after_tokens:
            raise StreamCancelled(f"cancelled after {record.events} token events (--cancel-after-tokens)")
        return done

    return on_body


def _keeping(feed: Any, kept: StreamText) -> Any:
    """`feed` that also hands each piece of body to `kept` (the parser hands over pieces of their own)."""
    keep = kept.add

    def on_body(data: bytes | bytearray, t: float) -> bool:
        keep(data)
        return feed(data, t)

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


def _report(resp: Any, record: RequestRecord) -> None:
    """Set what Locust reports for the HTTP request: E2E latency, output tokens, outcome."""
    meta = resp.request_meta
    meta["response_time"], meta["response_length"] = report_values(record)
    meta["context"] = {**meta["context"], RECORD_KEY: record}
    if record.ok or record.cancelled:  # cancelled: not a failure
        resp.success()
    else:
        resp.failure(RequestFailure(record.error_kind, record.error_message))


def report_values(record: RequestRecord) -> tuple[float, int]:
    """What Locust's HTTP row shows for a finished request: (E2E latency in ms, output tokens — for an API that
    counts inputs (embeddings), prompt tokens); for a failed one (time to its end, 0), for a cancelled one (time to
    its end, the tokens it got)."""
    t_end = record.t_last if record.ok else record.t_done
    if not (record.ok or record.cancelled):
        return (t_end - record.t_send) * 1000, 0
    length = record.output_tokens if api(record.endpoint).counts_outputs else (record.prompt_tokens or 0)
    return (t_end - record.t_send) * 1000, length
