"""Per-request records (`--requests-jsonl`): one JSON line per finished request in requests.jsonl (docs/results.md).

Every line is a JSON object with the fields of `FIELDS`, in that order — one declared list of (name, how to read it
from a `RequestRecord` and the process's `EpochClock`); a new field is one line there. Times are epoch seconds
(`time.time()`'s scale, floats: to a fraction of a microsecond) so that the lines join with a server's request logs;
null where the moment never happened.

Times that cross processes are on the run's clock (`load.clock.RunClock`: the master's wall clock; a worker's own
corrected by its measured offset, as it stands when the line is made).

`RequestLines` is one process's sampler and buffer: each finished request is kept with probability `sample`
(`--requests-sample`, drawn from a generator seeded with `--seed` and the process's index: the same run draws the
same), as one line of bytes, until `take()` empties it. It holds at most `MAX_PENDING_BYTES`; beyond, lines are
dropped and counted. `RequestsFile` appends taken lines to the results folder's requests.jsonl. Workers ship their
lines to the master in their reports (`runtime/users_part.py`); the master, or a local runner, writes them.

Pure: no Locust, no gevent.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import IO, Any

import orjson

from llm_locust.load.clock import RunClock
from llm_locust.metrics.record import RequestRecord

REQUESTS_FILE = "requests.jsonl"
MAX_PENDING_BYTES = 32 * 1024 * 1024
"""Lines one process keeps between two takes (a worker's report every 3 s), at most; beyond, lines are dropped."""


@dataclass(frozen=True, slots=True)
class EpochClock:
    """Turns a process's `perf_counter` seconds into epoch seconds: `offset_s` = `time.time()` − `perf_counter()`,
    read once (`now()`)."""

    offset_s: float

    @classmethod
    def now(cls, tries: int = 5) -> EpochClock:
        """The clock of this process, read now: of `tries` readings of `time.time()` between two `perf_counter()`,
        the one bracketed closest (a reading interrupted by the scheduler is not taken)."""
        best_s, offset_s = float("inf"), 0.0
        for _ in range(tries):
            before = time.perf_counter()
            wall = time.time()
            after = time.perf_counter()
            if after - before < best_s:
                best_s, offset_s = after - before, wall - (before + after) / 2
        return cls(offset_s)

    def epoch_s(self, t: float | None) -> float | None:
        """`t` (perf_counter seconds, or None) as epoch seconds (None stays None)."""
        return None if t is None else t + self.offset_s


def _time(name: str) -> Callable[[RequestRecord, EpochClock], Any]:
    """The reader of the record's timestamp `name`, as epoch seconds."""
    read = attrgetter(name)

    def epoch_s(record: RequestRecord, clock: EpochClock) -> float | None:
        t = read(record)
        return None if t is None else t + clock.offset_s

    return epoch_s


def _group(dimension: str) -> Callable[[RequestRecord, EpochClock], Any]:
    """The reader of the record's label in the breakdown `dimension` (None when it has none)."""

    def label(record: RequestRecord, _: EpochClock) -> str | None:
        for dim, value in record.groups:
            if dim == dimension:
                return value
        return None

    return label


def _outcome(record: RequestRecord, _: EpochClock) -> str:
    return "ok" if record.ok else "cancelled" if record.cancelled else "failed"


def _score(record: RequestRecord) -> float | None:
    """The record's score as the metrics count it: a successful request's (a `check` failure drops it)."""
    return record.score if record.ok else None


def _reference(record: RequestRecord, _: EpochClock) -> dict[str, Any] | None:
    """The checks of the record's reference that fit a line: `expected`, `regex`, `answer` (the right letter) and
    `schema` (true: the answer had to satisfy one, as `settings` or the dataset gave it); None without a reference."""
    reference = record.reference
    if reference is None:
        return None
    checks = {"expected": reference.expected, "regex": reference.regex, "answer": reference.answer}
    return {**{k: v for k, v in checks.items() if v is not None}, **({"schema": True} if reference.schema else {})}


FIELDS: tuple[tuple[str, Callable[[RequestRecord, EpochClock], Any]], ...] = (
    ("request_id", lambda r, _: r.server_request_id or None),  # the x-request-id header, else the response's id
    ("endpoint", lambda r, _: r.endpoint),
    ("t_sched", _time("t_sched")),  # open loop: when it was due
    ("t_send", _time("t_send")),  # just before it was sent (before the connection was checked out)
    ("t_uploaded", _time("t_uploaded")),  # its last byte handed to the kernel; null with the openai SDK
    ("t_headers", _time("t_headers")),  # arrival of the response head (first byte); null when not streamed
    ("t_first", _time("t_first")),  # first generated token
    ("t_last", _time("t_last")),  # last generated token
    ("t_done", _time("t_done")),  # end of the response
    ("step", lambda r, _: r.step if r.step >= 0 else None),  # sweep step index
    ("measured", lambda r, _: r.measured),  # False: sent during its step's warm-up
    ("outcome", _outcome),  # ok, failed or cancelled
    ("status", lambda r, _: r.status_code or None),  # HTTP status; null: no response
    ("error_kind", lambda r, _: None if r.error_kind is None else r.error_kind.value),
    ("prompt_tokens", lambda r, _: r.prompt_tokens),  # the server's usage count
    ("output_tokens", lambda r, _: r.output_tokens),
    ("token_source", lambda r, _: r.token_source.value),  # where output_tokens came from
    ("replica", _group("replica")),  # --replica-balance: the replica it went to
    ("model", lambda r, _: r.model or None),  # the model it named (--model-mix: the one drawn)
    ("session", lambda r, _: r.session or None),  # its conversation's id (--session-header's value)
    ("turn", lambda r, _: r.turn or None),  # its 1-based turn in a multi-turn session
    ("name", _group("name")),  # a scenario's name for it (`name=`): its Locust row
    ("score", lambda r, _: _score(r)),  # its answer's score in [0, 1]; null: not scored (no reference, or it failed)
    ("correct", lambda r, _: None if (s := _score(r)) is None else s >= 1.0),  # a scored answer was right (score 1)
    ("answer", lambda r, _: r.content_text if _score(r) is not None else None),  # a scored answer's text
    ("reference", _reference),  # what it was scored against (with a dataset's or a scenario's reference)
)
"""The fields of a line, in order: (name, reader of a `RequestRecord` and the process's `EpochClock`)."""


def line_of(record: RequestRecord, clock: EpochClock) -> bytes:
    """The JSON line of `record` (newline included)."""
    return orjson.dumps({name: read(record, clock) for name, read in FIELDS}) + b"\n"


class RequestLines:
    """One process's lines waiting to be written: sampled (`sample`, seeded with `seed` and `process_index`), kept
    as bytes up to `limit_bytes` (beyond: dropped, counted in `take`); times on the run's clock `run_clock` (the
    master's: this process's own minus its offset; a fresh `RunClock`, offset 0, where this process is the master's)."""

    __slots__ = ("_buffer", "_clock", "_draw", "_dropped", "_limit", "_run_clock", "_shift_s", "_wall", "sample")

    def __init__(
        self,
        sample: float,
        seed: int | None,
        process_index: int,
        limit_bytes: int = MAX_PENDING_BYTES,
        run_clock: RunClock | None = None,
    ) -> None:
        self.sample = sample
        self._draw = random.Random(None if seed is None else seed * 1000 + process_index).random
        self._wall = self._clock = EpochClock.now()  # this process's perf_counter -> its wall clock; then -> the run's
        self._run_clock = run_clock or RunClock()
        self._shift_s = 0.0
        self._buffer = bytearray()
        self._dropped = 0
        self._limit = limit_bytes

    def add(self, record: RequestRecord) -> None:
        """Keep the line of the finished request `record` if the sample draws it (and the buffer has room)."""
        if self.sample < 1.0 and self._draw() >= self.sample:
            return
        if len(self._buffer) >= self._limit:
            self._dropped += 1
            return
        shift_s = self._run_clock.offset_s
        if shift_s != self._shift_s:  # a new (or better) offset measured
            self._shift_s, self._clock = shift_s, EpochClock(self._wall.offset_s - shift_s)
        self._buffer += line_of(record, self._clock)

    def take(self) -> tuple[bytes, int]:
        """The lines kept since the last take (bytes, one line per request) and the number dropped meanwhile."""
        lines, dropped = bytes(self._buffer), self._dropped
        self._buffer.clear()
        self._dropped = 0
        return lines, dropped


class RequestsFile:
    """The results folder's requests.jsonl, written as lines arrive; counts its lines and the lines dropped."""

    def __init__(self, results_dir: Path) -> None:
        results_dir.mkdir(parents=True, exist_ok=True)
        self.path = results_dir / REQUESTS_FILE
        self._file: IO[bytes] | None = self.path.open("wb", buffering=0)  # each write goes to the kernel whole
        self._size = 0  # bytes of whole lines written
        self.failed = False  # a write failed
        self.lines = 0
        self.dropped = 0

    def write(self, lines: bytes, dropped: int = 0) -> None:
        """Append `lines` (complete JSON lines); note `dropped` lines a process could not keep. Lines that come once
        the file is closed are counted as dropped. A write that fails (disk full: OSError, raised) leaves the file at
        its last whole line, closed: no line is written after it (nor counted: the failure is the run's error)."""
        self.dropped += dropped
        if not lines or self.failed:
            return
        if self._file is None:
            self.dropped += lines.count(b"\n")
            return
        try:
            view = memoryview(lines)
            while view:  # an unbuffered write may take part of it
                written = self._file.write(view)
                if not written:
                    raise OSError(errno.ENOSPC, "no byte written")
                view = view[written:]
        except OSError:
            file, self._file, self.failed = self._file, None, True
            with contextlib.suppress(OSError):
                os.ftruncate(file.fileno(), self._size)
            file.close()
            raise
        self._size += len(lines)
        self.lines += lines.count(b"\n")

    def close(self) -> None:
        """Close the file (safe to call again)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def warnings(self) -> tuple[str, ...]:
        """The warning of lines dropped (a process held `MAX_PENDING_BYTES` between two reports), if any."""
        if not self.dropped:
            return ()
        return (f"{self.dropped} request line(s) were not written to {self.path.name}: a process had more than "
                f"{MAX_PENDING_BYTES // 2**20} MiB of lines waiting (use --requests-sample)",)  # fmt: skip

    def as_dict(self, sample: float) -> dict[str, Any]:
        """summary.json's `requests_file`: the file's name, its lines, the sample rate and the lines dropped."""
        return {"file": self.path.name, "lines": self.lines, "sample": sample, "dropped": self.dropped}


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The records of a requests.jsonl file (a last line cut short by an interrupted run is left out)."""
    records = []
    with path.open("rb") as f:
        for line in f:
            try:
                records.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                continue
    return records
