"""One accepted completion request being answered on one connection.

A `Generation` is told by its timing model how many more tokens were produced (`emit`); a
streamed response writes one SSE event per token (each in its own HTTP chunk) — or, with
`tokens_per_chunk` K > 1, the first token alone and then one event per K tokens, when the K-th is
produced —, a non-streamed one writes the whole JSON body with the last token. It records the
ground truth as it goes and hands the finished record to the trace.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Callable
from time import perf_counter
from typing import Protocol

from llm_locust.sim import http
from llm_locust.sim.apis import BY_NAME
from llm_locust.sim.apis.completions import MALFORMED_EVENT
from llm_locust.sim.apis.wire import CompletionSpec, Encoder
from llm_locust.sim.engine import Sequence
from llm_locust.sim.trace import TraceRecord


class Transport(Protocol):
    """The part of `asyncio.Transport` a generation writes to."""

    def write(self, data: bytes) -> None: ...


class Generation:
    """See the module docstring. `on_done(generation)` runs once, when finished or cancelled."""

    __slots__ = (
        "_chunked", "_encoder", "_on_done", "_per_chunk", "_sent", "_transport", "keep_alive", "record",
        "seq", "spec",
    )  # fmt: skip

    def __init__(
        self,
        transport: Transport,
        spec: CompletionSpec,
        record: TraceRecord,
        encoder: Encoder,
        *,
        chunked: bool,
        keep_alive: bool,
        on_done: Callable[[Generation], None],
        tokens_per_chunk: int = 1,
    ) -> None:
        self._transport = transport
        self.spec = spec
        self.record = record
        self.seq = Sequence(spec.prompt_tokens, spec.output_tokens, record.t_recv, self)
        self._encoder = encoder
        self._chunked = chunked
        self.keep_alive = keep_alive
        self._on_done = on_done
        self._per_chunk = tokens_per_chunk
        self._sent = 0  # tokens written (tokens_per_chunk > 1)

    def start(self) -> None:
        """Write the response head (and the API's start events: chat's role event, ...) right away."""
        if not self.spec.stream:
            return
        api = BY_NAME[self.spec.endpoint]  # its content type: SSE, AWS event-stream (ConverseStream), the request's
        content_type = api.content_type if api.stream_content_type is None else api.stream_content_type(self.spec)
        named = (f"{api.request_id_header}: {self.record.id}",) if api.request_id_header else ()
        head = http.response_head(200, content_type, content_length=None, keep_alive=self.keep_alive, extra=named)
        start = self._encoder.start_events()
        if start:
            head += self._frame(start)
        self.record.t_head = perf_counter()  # before the write, as a token's time
        self._transport.write(head)

    def emit(self, count: int) -> None:
        """Deliver the `count` tokens just produced (`seq.emitted` already includes them); an answer that can be right
        or wrong is settled first, for the batch the request was admitted into."""
        seq = self.seq
        answer = self.spec.answer
        if answer is not None and answer.kind is None:
            answer.settle(seq.batch)
        if not self.spec.stream:
            now_s = perf_counter()
            self.record.token_times.extend([now_s] * count)
            if seq.done:
                body = self._encoder.body()
                # a whole JSON body (embeddings) may hold no id: its header names the request, as OpenAI's does
                named = (f"x-request-id: {self.record.id}",)
                head = http.response_head(
                    200, "application/json", content_length=len(body), keep_alive=self.keep_alive, extra=named
                )
                self.record.t_head = perf_counter()
                self._transport.write(head + body)
                self._finish(perf_counter())
            return
        emitted = seq.emitted
        done = emitted >= seq.output_tokens
        if self._per_chunk > 1:
            self._emit_chunks(emitted, done)
            return
        token_event = self._encoder.token_event
        if count == 1 and not done:
            prefix, tail = token_event(emitted - 1)
            self.record.token_times.append(perf_counter())  # before the write: a client cannot beat it
            if self._chunked:
                self._transport.write(b"%x\r\n%b%b\r\n" % (len(prefix) + len(tail), prefix, tail))
            else:
                self._transport.write(prefix + tail)
            return
        events = [prefix + tail for prefix, tail in map(token_event, range(emitted - count, emitted))]
        self._write_events(events, count, done)

    def _emit_chunks(self, emitted: int, done: bool) -> None:
        """Write the multi-token events that are complete once `emitted` tokens are produced (`done`: all are):
        the first token alone, then `tokens_per_chunk` per event, the last event with what remains."""
        events, start = [], self._sent
        while self._sent < emitted:
            stop = self._sent + (1 if self._sent == 0 else self._per_chunk)
            if stop > emitted and not done:
                break
            stop = min(stop, emitted)
            events.append(self._encoder.tokens_event(self._sent, stop))
            self._sent = stop
        if events:
            self._write_events(events, self._sent - start, done)

    def _write_events(self, events: list[bytes], tokens: int, done: bool) -> None:
        """Write `events` (carrying `tokens` tokens) in one go, the stream's end after them when `done`."""
        if done:
            events.extend(self._encoder.end_events())
        if self._chunked:
            events = [http.chunk(event) for event in events]
            if done:
                events.append(http.LAST_CHUNK)
        now_s = perf_counter()
        self.record.token_times.extend([now_s] * tokens)
        self._transport.write(b"".join(events))
        if done:
            self._finish(now_s)

    def cancel(self) -> None:
        """Record that the client went away before the end (the driver has already let go)."""
        self.record.cancelled = True
        self._finish(perf_counter())

    def _frame(self, event: bytes) -> bytes:
        return http.chunk(event) if self._chunked else event

    def _finish(self, now_s: float, natural: bool = True) -> None:
        """Close the record (a finish_reason only for a `natural` end) and hand it on."""
        record = self.record
        record.t_done = now_s
        record.completion_tokens = self.seq.emitted
        record.queue_s = self.seq.queue_s
        if natural and not record.cancelled:
            record.finish_reason = self.spec.finish_reason
        self._on_done(self)


_LINGER_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST instead of FIN


def reset_connection(transport: asyncio.BaseTransport) -> None:
    """Close `transport`'s connection with a TCP reset (RST), dropping unsent data."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
    transport.abort()  # type: ignore[attr-defined]


class FaultGeneration(Generation):
    """A streamed response that suffers one mid-stream fault (`llm_locust.sim.faults.MID_STREAM`).

    The fault takes the place of token number `output_tokens // 2` (at least the first: the only one of a
    one-token response; with 2 or more, before the last), however the timing model groups the tokens it produces:
    a late wake that delivers many tokens at once — even every remaining one — still gets the fault at that token,
    the tokens before it written first. `release()` takes the generation away from its timing driver when the fault
    ends or pauses the stream. The normal per-token path (`Generation.emit`) is untouched: only faulted responses
    are instances of this class.
    """

    __slots__ = ("_at", "_error_message", "_fault", "_huge_bytes", "_release", "_stall_s", "_timer")

    def __init__(
        self,
        *args: object,
        fault: str,
        release: Callable[[Generation], None],
        stall_s: float,
        huge_bytes: int,
        error_message: str = "simulated engine failure",
        **kwargs: object,
    ) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._fault: str | None = fault
        self._at = max(1, self.seq.output_tokens // 2)
        self._release = release
        self._stall_s = stall_s
        self._huge_bytes = huge_bytes
        self._error_message = error_message  # the stream_error event's
        self._timer: asyncio.TimerHandle | None = None

    def emit(self, count: int) -> None:
        """Deliver the `count` tokens just produced; the fault takes the place of token `_at` when it is among them."""
        seq = self.seq
        fault = self._fault
        if fault is None or seq.emitted < self._at:
            super().emit(count)
            return
        self._fault = None
        self.record.fault = fault
        emitted, at = seq.emitted, self._at
        before = at - 1 - (emitted - count)  # tokens of this batch before the faulted one: they go out as usual
        if before:
            seq.emitted = at - 1
            super().emit(before)
        seq.emitted = at
        if fault == "huge_chunk":
            self.record.token_times.append(perf_counter())
            self._transport.write(self._frame(self._encoder.text_event("x" * self._huge_bytes)))
        elif fault == "bad_json":
            self._transport.write(self._frame(MALFORMED_EVENT))  # the stream goes on after it
        else:
            seq.emitted = at - 1  # the faulted token is never written
            self._release(self)
            if fault == "stall":
                self._timer = asyncio.get_running_loop().call_later(self._stall_s, self._resume)
            elif fault == "reset":
                reset_connection(self._transport)  # type: ignore[arg-type]  # connection_lost records it
            else:  # cut, stream_error
                tail = self._encoder.error_event(self._error_message) if fault == "stream_error" else b""
                self.keep_alive = self.keep_alive and self._chunked  # an unchunked body ends by closing
                self._transport.write(
                    (self._frame(tail) if tail else b"") + (http.LAST_CHUNK if self._chunked else b"")
                )
                self._finish(perf_counter(), natural=False)
            return
        seq.emitted = emitted
        if emitted > at or seq.done:  # the tokens of this batch after the faulted one, and the stream's end if due
            super().emit(emitted - at)

    def _resume(self) -> None:
        """After a stall: write every remaining token at once and end the stream normally."""
        self._timer = None
        seq = self.seq
        remaining = seq.output_tokens - seq.emitted
        seq.emitted = seq.output_tokens
        super().emit(remaining)

    def cancel(self) -> None:
        """The client went away (e.g. timed out during a stall): stop any pending resume."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        super().cancel()
