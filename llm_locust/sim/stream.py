"""One accepted completion request being answered on one connection.

A `Generation` is told by its timing model how many more tokens were produced (`emit`); a
streamed response writes one SSE event per token (each in its own HTTP chunk), a non-streamed
one writes the whole JSON body with the last token. It records the ground truth as it goes and
hands the finished record to the trace.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter
from typing import Protocol

from llm_locust.sim import http, openai
from llm_locust.sim.engine import Sequence
from llm_locust.sim.trace import TraceRecord


class Transport(Protocol):
    """The part of `asyncio.Transport` a generation writes to."""

    def write(self, data: bytes) -> None: ...


class Generation:
    """See the module docstring. `on_done(generation)` runs once, when finished or cancelled."""

    __slots__ = ("_body", "_chunked", "_encoder", "_on_done", "_transport", "keep_alive", "record", "seq", "spec")

    def __init__(
        self,
        transport: Transport,
        spec: openai.CompletionSpec,
        record: TraceRecord,
        encoder: openai.EventEncoder,
        body: Callable[[], bytes],
        *,
        chunked: bool,
        keep_alive: bool,
        on_done: Callable[[Generation], None],
    ) -> None:
        self._transport = transport
        self.spec = spec
        self.record = record
        self.seq = Sequence(spec.prompt_tokens, spec.output_tokens, record.t_recv, self)
        self._encoder = encoder
        self._body = body
        self._chunked = chunked
        self.keep_alive = keep_alive
        self._on_done = on_done

    def start(self) -> None:
        """Write the response head (and, for a streamed chat, the role event) right away."""
        if not self.spec.stream:
            return
        head = http.response_head(200, "text/event-stream", content_length=None, keep_alive=self.keep_alive)
        if self.spec.endpoint == "chat":
            head += self._frame(self._encoder.role_event())
        self._transport.write(head)

    def emit(self, count: int) -> None:
        """Deliver the `count` tokens just produced (`seq.emitted` already includes them)."""
        seq = self.seq
        if not self.spec.stream:
            now_s = perf_counter()
            self.record.token_times.extend([now_s] * count)
            if seq.done:
                body = self._body()
                self._transport.write(
                    http.response_head(200, "application/json", content_length=len(body), keep_alive=self.keep_alive)
                    + body
                )
                self._finish(perf_counter())
            return
        emitted = seq.emitted
        done = emitted >= seq.output_tokens
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
        if done:
            if self.spec.include_usage:
                events.append(self._encoder.usage_event())
            events.append(openai.DONE_EVENT)
        if self._chunked:
            events = [http.chunk(event) for event in events]
            if done:
                events.append(http.LAST_CHUNK)
        now_s = perf_counter()
        self.record.token_times.extend([now_s] * count)
        self._transport.write(b"".join(events))
        if done:
            self._finish(now_s)

    def cancel(self) -> None:
        """Record that the client went away before the end (the driver has already let go)."""
        self.record.cancelled = True
        self._finish(perf_counter())

    def _frame(self, event: bytes) -> bytes:
        return http.chunk(event) if self._chunked else event

    def _finish(self, now_s: float) -> None:
        record = self.record
        record.t_done = now_s
        record.completion_tokens = self.seq.emitted
        record.queue_s = self.seq.queue_s
        if not record.cancelled:
            record.finish_reason = self.spec.finish_reason
        self._on_done(self)
