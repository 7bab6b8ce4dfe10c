"""Timing models, free of I/O: when each token of each request is produced.

- `FixedTiming`: a TTFT per request (constant, or drawn from a known distribution: `latency.Latency`) and a constant
  ITL; token i is due at t_ready_s + ttft_s + i * itl_s (t_ready_s: t_recv_s, or later when the request's LoRA
  adapter had to be loaded first, `lora.AdapterSlots`); a warming-up server's TTFT drifts down over its first seconds
  (`WarmupDrift`).
- `BatchingEngine`: continuous batching with a FIFO waiting queue and a running batch of at most
  `max_batch` sequences. Steps run back-to-back while there is work. At the start of a step,
  waiting sequences whose `t_ready_s` has come are admitted into free slots (the others keep their place); the
  step lasts
  decode_step_s + decode_step_s_per_seq * running + prefill_s_per_token * (prompt tokens admitted, less those
  the prefix cache held),
  where `running` counts the batch after admission. At the end of a step every running sequence
  produces its next token (a newly admitted one produces its first: that is its TTFT) and finished
  sequences leave. Step ends are absolute times: the next step ends at this step's end plus the next
  duration, unless the engine idled, in which case the next step starts when work arrives (or, when only sequences
  not yet ready wait, when the first of them is ready).

All times are `time.perf_counter()` seconds.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass
from typing import Any

from llm_locust.sim.latency import Latency


class Sequence:
    """One request's generation state inside a timing model.

    `emitted` counts tokens produced so far (of `output_tokens`); `t_admit_s` is when it entered
    the running batch (the batching model) or `t_ready_s` (the fixed model); `t_ready_s` is when its prefill may
    start at the earliest (`t_recv_s`, or the end of its LoRA adapter's load); `cached_tokens` of the prompt cost no
    prefill (prefix-cache hits); `sink` is whatever the
    caller wants back with the sequence (the engine never touches it).
    """

    __slots__ = (
        "batch",
        "cached_tokens",
        "cancelled",
        "emitted",
        "output_tokens",
        "prompt_tokens",
        "sink",
        "t_admit_s",
        "t_ready_s",
        "t_recv_s",
        "ttft_s",
    )

    def __init__(self, prompt_tokens: int, output_tokens: int, t_recv_s: float, sink: Any = None) -> None:
        self.prompt_tokens = prompt_tokens
        self.cached_tokens = 0  # prompt tokens the prefix cache held: no prefill for them
        self.output_tokens = output_tokens
        self.t_recv_s = t_recv_s
        self.t_ready_s = t_recv_s
        self.t_admit_s: float | None = None
        self.ttft_s = 0.0  # the fixed model's TTFT of this request, s (`FixedTiming.start`)
        self.batch = 0  # sequences running when it was admitted, itself included (0: not yet)
        self.emitted = 0
        self.cancelled = False
        self.sink = sink

    @property
    def done(self) -> bool:
        """True once every output token has been produced."""
        return self.emitted >= self.output_tokens

    @property
    def prefill_share(self) -> float:
        """The share (0..1] of the prompt that must be prefilled: the rest was cached."""
        return 1.0 - self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 1.0

    @property
    def queue_s(self) -> float:
        """Seconds spent waiting before admission (0 until admitted)."""
        return 0.0 if self.t_admit_s is None else self.t_admit_s - self.t_recv_s


DRIFT_FACTOR = 3.0
"""A warming-up server's first TTFT, in times its settled TTFT (`WarmupDrift`)."""


class WarmupDrift:
    """A server that warms up: the TTFT of a request received `t` seconds after the first one is multiplied by
    1 + (DRIFT_FACTOR - 1) · max(0, 1 - t / seconds) — 3× at first, falling linearly to 1× at `seconds`."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._first_s: float | None = None

    def factor(self, t_recv_s: float) -> float:
        """The TTFT factor of a request received at `t_recv_s` (perf_counter s); the first request sets the origin."""
        if self._first_s is None:
            self._first_s = t_recv_s
        return 1.0 + (DRIFT_FACTOR - 1.0) * max(0.0, 1.0 - (t_recv_s - self._first_s) / self.seconds)


class FixedTiming:
    """Time to first token `ttft` (ms; all prefill: a prefix-cache hit cuts it by the cached share), one draw per
    request from a generator seeded with `seed`, in the order requests start, multiplied by a warming-up server's
    `drift`, and constant inter-token latency `itl_s` (seconds)."""

    def __init__(self, ttft: Latency, itl_s: float, seed: int = 0, drift: WarmupDrift | None = None) -> None:
        self.ttft = ttft
        self.itl_s = itl_s
        self.drift = drift
        self._rng = random.Random(f"{seed}/ttft")

    def start(self, seq: Sequence) -> None:
        """Draw `seq`'s TTFT."""
        factor = 1.0 if self.drift is None else self.drift.factor(seq.t_recv_s)
        seq.ttft_s = self.ttft.draw_ms(self._rng) / 1e3 * factor

    def due_s(self, seq: Sequence, index: int) -> float:
        """Return the absolute due time (perf_counter s) of `seq`'s token `index` (0-based)."""
        return seq.t_ready_s + seq.ttft_s * seq.prefill_share + index * self.itl_s

    def tokens_due(self, seq: Sequence, now_s: float) -> int:
        """Return how many of `seq`'s not-yet-emitted tokens are due at `now_s`."""
        first_s = seq.t_ready_s + seq.ttft_s * seq.prefill_share
        itl_s = self.itl_s
        total = seq.output_tokens
        index = seq.emitted
        while index < total and first_s + index * itl_s <= now_s:
            index += 1
        return index - seq.emitted


@dataclass(frozen=True, slots=True)
class BatchingParams:
    """Cost model of the batching engine (seconds); see the module docstring."""

    max_batch: int
    decode_step_s: float
    decode_step_s_per_seq: float
    prefill_s_per_token: float

    def step_s(self, running: int, admitted_prompt_tokens: int) -> float:
        """Return the duration in seconds of a step with `running` sequences in the batch."""
        return (
            self.decode_step_s
            + self.decode_step_s_per_seq * running
            + self.prefill_s_per_token * admitted_prompt_tokens
        )


class BatchingEngine:
    """Continuous-batching scheduler state; the caller drives it at `step_end_s`.

    Protocol: `submit` a sequence; if it returns True a step has just started and the caller must
    call `complete_step` at `step_end_s`. `complete_step` returns the sequences that produced a
    token and starts the next step if work remains (`step_end_s` is then its end, else None).
    """

    def __init__(self, params: BatchingParams) -> None:
        self.params = params
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.step_end_s: float | None = None

    @property
    def num_waiting(self) -> int:
        """Sequences queued and not cancelled."""
        return sum(1 for seq in self.waiting if not seq.cancelled)

    def submit(self, seq: Sequence, now_s: float) -> bool:
        """Queue `seq`; return True if the engine was idle and a step started at `now_s`."""
        self.waiting.append(seq)
        if self.step_end_s is not None:
            return False
        self._start_step(now_s)
        return True

    def cancel(self, seq: Sequence) -> None:
        """Drop `seq` (queued or running); its batch slot is free from the next step on."""
        seq.cancelled = True
        if seq in self.running:
            self.running.remove(seq)

    def complete_step(self) -> list[Sequence]:
        """End the current step: each running sequence produces one token; return those sequences."""
        assert self.step_end_s is not None, "complete_step called while idle"
        step_end_s = self.step_end_s
        produced = self.running
        for seq in produced:
            seq.emitted += 1
        self.running = [seq for seq in produced if not seq.done]
        if self.running or self.waiting:
            self._start_step(step_end_s)
        else:
            self.step_end_s = None
        return produced

    def _start_step(self, start_s: float) -> None:
        admitted_prompt_tokens = 0
        not_ready: list[Sequence] = []  # their adapter is still loading: they keep their place in the queue
        already = len(self.running)
        while self.waiting and len(self.running) < self.params.max_batch:
            seq = self.waiting.popleft()
            if seq.cancelled:
                continue
            if seq.t_ready_s > start_s:
                not_ready.append(seq)
                continue
            seq.t_admit_s = start_s
            admitted_prompt_tokens += seq.prompt_tokens - seq.cached_tokens
            self.running.append(seq)
        for seq in self.running[already:]:  # those admitted now: this step's batch
            seq.batch = len(self.running)
        self.waiting.extendleft(reversed(not_ready))
        if not self.running and not_ready:  # nothing to run until the first of them is ready: an idle step
            self.step_end_s = min(seq.t_ready_s for seq in not_ready)
            return
        self.step_end_s = start_s + self.params.step_s(len(self.running), admitted_prompt_tokens)
