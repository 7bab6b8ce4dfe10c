"""Load models, free of I/O: arrival processes for open-loop request rates, and sweep steps.

- Closed loop (concurrency): N users, each sends its next request when the last one ended.
- Open loop (request rate): requests are due at the times of an arrival process of rate R
  (`ArrivalProcess`: Poisson, constant or gamma with a burstiness factor); users only cap the
  requests in flight. With M worker processes the arrivals are still one process of rate R, shared
  out (`sequence.py`): independent per-worker constant or gamma schedules would superpose into
  something else.
- Sweeps: `Step`s run one after the other, each for `duration_s`, its first `warmup_s` seconds
  excluded from its metrics; a concurrency sweep varies the users, a rate sweep the rate, a length
  sweep the prompt and/or output length of every request; together they make a grid (`sweep_steps`).

All times are `time.perf_counter()` seconds unless a name says otherwise.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any, Literal

from llm_locust.errors import ConfigError

ArrivalKind = Literal["poisson", "constant", "gamma"]
ARRIVAL_KINDS: tuple[ArrivalKind, ...] = ("poisson", "constant", "gamma")


class ArrivalProcess:
    """Absolute due times of successive requests at `rate_per_s` (see the module docstring).

    gamma: inter-arrival times ~ Gamma(shape=burstiness, scale=1/(rate·burstiness)), mean 1/rate
    (vLLM's definition: burstiness 1 is Poisson, < 1 burstier, > 1 more regular).
    """

    def __init__(
        self, rate_per_s: float, kind: ArrivalKind, burstiness: float, start_s: float, rng: random.Random
    ) -> None:
        if not rate_per_s > 0:
            raise ValueError(f"rate must be > 0, got {rate_per_s}")
        self.rate_per_s = rate_per_s
        self.kind = kind
        self.burstiness = burstiness
        self._rng = rng
        self._next_s = start_s + (self._gap_s() if kind != "constant" else 0.0)

    def _gap_s(self) -> float:
        if self.kind == "poisson":
            return self._rng.expovariate(self.rate_per_s)
        if self.kind == "gamma":
            return self._rng.gammavariate(self.burstiness, 1.0 / (self.rate_per_s * self.burstiness))
        return 1.0 / self.rate_per_s

    def next_s(self) -> float:
        """The due time of the next request (and advance)."""
        due_s = self._next_s
        self._next_s = due_s + self._gap_s()
        return due_s


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a sweep: `users` (concurrency, or the in-flight cap at a rate), an optional
    offered `rate_per_s`, how long it runs and how much of its start is warm-up (seconds), and the
    prompt and output lengths (tokens) of its requests when a length sweep sets them (None: the
    run's --prompt-tokens / --max-tokens)."""

    index: int
    users: int
    rate_per_s: float | None
    duration_s: float
    warmup_s: float
    prompt_tokens: int | None = None
    max_tokens: int | None = None

    @property
    def load_label(self) -> str:
        """`users=8` or `rate=2.5/s`."""
        return f"users={self.users}" if self.rate_per_s is None else f"rate={self.rate_per_s:g}/s"

    @property
    def label(self) -> str:
        """`users=8`, `rate=2.5/s`, with the swept lengths: `users=8 prompt=512 max=128`."""
        lengths = [f"{name}={n}" for name, n in (("prompt", self.prompt_tokens), ("max", self.max_tokens)) if n]
        return " ".join([self.load_label, *lengths])

    def to_wire(self) -> dict[str, Any]:
        """A msgpack-able dict; `Step(**d)` reverses it."""
        return {
            "index": self.index,
            "users": self.users,
            "rate_per_s": self.rate_per_s,
            "duration_s": self.duration_s,
            "warmup_s": self.warmup_s,
            "prompt_tokens": self.prompt_tokens,
            "max_tokens": self.max_tokens,
        }


@dataclass
class StepSpan:
    """When one step ran: wall-clock epoch seconds of its start, start of its measured window (the end of its warm-up
    floor, moved to its steady start once found: `load.step_end`) and end; why it ended (`step_end.END_REASONS`) and
    what the decision saw (`ended_detail`, summary.json's)."""

    step: Step
    start_s: float
    measure_from_s: float
    end_s: float | None = None
    ended: str | None = None
    ended_detail: dict[str, Any] | None = None

    @property
    def floor_s(self) -> float:
        """The end of its `--warmup-s` floor (epoch s): no request sent before it is measured."""
        return self.start_s + self.step.warmup_s

    @property
    def measure_s(self) -> float:
        """Length of the measurement window (after warm-up), seconds; up to now while running."""
        return max(0.0, (self.end_s or time.time()) - self.measure_from_s)


def parse_number_list(option: str, text: str, kind: type[int] | type[float]) -> list[Any]:
    """`1,2,4` -> [1, 2, 4]: positive numbers; ConfigError naming the option otherwise."""
    values = []
    for part in text.split(","):
        try:
            value = kind(part.strip())
        except ValueError:
            raise ConfigError(f"{option} {text!r}: {part.strip()!r} is not a {kind.__name__} (e.g. 1,2,4,8)") from None
        if not value > 0:
            raise ConfigError(f"{option} {text!r}: every value must be > 0, got {part.strip()}")
        values.append(value)
    return values


def sweep_steps(
    users: list[int],
    rates_per_s: list[float],
    max_concurrency: int,
    duration_s: float,
    warmup_s: float,
    prompt_tokens: list[int] | None = None,
    max_tokens: list[int] | None = None,
) -> tuple[Step, ...]:
    """The steps of a concurrency sweep (`users`), a rate sweep (`rates_per_s`, capped at
    `max_concurrency` users), a length sweep (`prompt_tokens`, `max_tokens`; at 1 user unless
    `users` or `rates_per_s` is given), or their grid; empty when nothing is swept.

    Grid order: each prompt length in turn (outermost), within it each output length, within that
    the load rising as given (innermost) — one load sweep per length pair, back to back.
    """
    if users and rates_per_s:
        raise ConfigError("--sweep-users and --sweep-rates exclude each other: sweep one load model per run")
    if not duration_s > 0:
        raise ConfigError(f"--step-duration-s must be > 0, got {duration_s}")
    if not 0 <= warmup_s < duration_s:
        raise ConfigError(
            f"--warmup-s must be >= 0 and shorter than --step-duration-s ({duration_s:g}), got {warmup_s}"
        )
    loads: list[tuple[int, float | None]] = [(max_concurrency, r) for r in rates_per_s] or [(n, None) for n in users]
    if not (loads or prompt_tokens or max_tokens):
        return ()
    cells = [
        (load, prompt, output)
        for prompt in prompt_tokens or [None]
        for output in max_tokens or [None]
        for load in loads or [(1, None)]
    ]
    return tuple(
        Step(i, n, rate, duration_s, warmup_s, prompt, output) for i, ((n, rate), prompt, output) in enumerate(cells)
    )


def worker_shares(total: float, users_by_worker: dict[str, int]) -> dict[str, float]:
    """Split `total` (a rate, or a request quota) across workers in proportion to their users.

    Workers with no user get nothing (they cannot send); with no user anywhere, an equal split.
    """
    users = sum(users_by_worker.values())
    if users == 0:
        return {w: total / len(users_by_worker) for w in users_by_worker} if users_by_worker else {}
    return {w: total * n / users for w, n in users_by_worker.items()}


def integer_shares(total: int, users_by_worker: dict[str, int]) -> dict[str, int]:
    """`worker_shares` rounded to whole numbers that add up to `total` exactly (largest remainder)."""
    shares = worker_shares(float(total), users_by_worker)
    whole = {w: int(s) for w, s in shares.items()}
    by_remainder = sorted(shares, key=lambda w: (whole[w] - shares[w], w))
    for w in by_remainder[: total - sum(whole.values())]:
        whole[w] += 1
    return whole
