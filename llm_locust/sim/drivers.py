"""Glue between a timing model (`engine`), the event loop (`timeline`) and generations.

A driver accepts generations (`submit`), tells each one when its tokens are produced, and lets go
of cancelled ones (`cancel`). `running` and `waiting` feed /metrics.
"""

from __future__ import annotations

from functools import partial
from typing import Protocol

from llm_locust.sim.engine import BatchingEngine, FixedTiming
from llm_locust.sim.stream import Generation
from llm_locust.sim.timeline import Timeline


class Driver(Protocol):
    """What the server needs from a timing model."""

    def submit(self, generation: Generation) -> None: ...
    def cancel(self, generation: Generation) -> None: ...
    @property
    def running(self) -> int: ...
    @property
    def waiting(self) -> int: ...


class FixedDriver:
    """Constant TTFT/ITL: each generation is its own timeline entry at its next token's due time. A generation whose
    LoRA adapter is loading counts as waiting until its `t_ready_s` (vLLM keeps it in its waiting queue)."""

    def __init__(self, timeline: Timeline, timing: FixedTiming) -> None:
        self._timeline = timeline
        self._timing = timing
        self.running = 0
        self.waiting = 0
        self._loading: set[Generation] = set()  # waiting for their adapter's load

    def submit(self, generation: Generation) -> None:
        """Schedule `generation`'s first token at t_ready + its TTFT (t_ready: t_recv, or its adapter's load's end)."""
        seq = generation.seq
        seq.t_admit_s = seq.t_ready_s
        self._timing.start(seq)
        if seq.t_ready_s > seq.t_recv_s:
            self._loading.add(generation)
            self.waiting += 1
            self._timeline.at(seq.t_ready_s, partial(self._admit, generation))
        else:
            self.running += 1
            seq.batch = self.running
        self._timeline.at(self._timing.due_s(seq, 0), partial(self._fire, generation))

    def _admit(self, generation: Generation, now_s: float) -> None:
        """`generation`'s adapter is loaded: from waiting to running (unless it was cancelled meanwhile)."""
        if generation in self._loading:
            self._loading.discard(generation)
            self.waiting -= 1
            self.running += 1
            generation.seq.batch = self.running

    def cancel(self, generation: Generation) -> None:
        """Stop producing tokens for `generation` (its timeline entry lapses on its next wake)."""
        seq = generation.seq
        if not seq.cancelled:
            seq.cancelled = True
            if generation in self._loading:  # still waiting for its adapter
                self._loading.discard(generation)
                self.waiting -= 1
            else:
                self.running -= 1

    def _fire(self, generation: Generation, now_s: float) -> float | None:
        seq = generation.seq
        if seq.cancelled:
            return None
        count = self._timing.tokens_due(seq, now_s)
        if count:
            seq.emitted += count
            generation.emit(count)
            if seq.cancelled:  # let go while emitting (a fault ended or paused the stream): counted by `cancel`
                return None
            if seq.done:
                self.running -= 1
                return None
        return self._timing.due_s(seq, seq.emitted)


class BatchingDriver:
    """Continuous batching: one timeline entry for the engine, at the end of its current step."""

    def __init__(self, timeline: Timeline, engine: BatchingEngine) -> None:
        self._timeline = timeline
        self._engine = engine

    @property
    def running(self) -> int:
        """Sequences in the running batch."""
        return len(self._engine.running)

    @property
    def waiting(self) -> int:
        """Sequences waiting for a batch slot."""
        return self._engine.num_waiting

    def submit(self, generation: Generation) -> None:
        """Queue `generation`; start the engine (a step beginning at t_recv) if it was idle."""
        if self._engine.submit(generation.seq, generation.seq.t_recv_s):
            self._timeline.at(self._engine.step_end_s, self._fire)  # type: ignore[arg-type]

    def cancel(self, generation: Generation) -> None:
        """Free `generation`'s batch slot (or queue place)."""
        self._engine.cancel(generation.seq)

    def _fire(self, now_s: float) -> float | None:
        produced = self._engine.complete_step()
        next_step_end_s = self._engine.step_end_s
        for seq in produced:
            if not seq.cancelled:
                seq.sink.emit(1)
        return next_step_end_s
