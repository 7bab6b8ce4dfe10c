"""Multi-turn sessions: one conversation's history, played turn by turn by one user (`--session-turns`).

A `Session` holds its history as chat messages (`{"role", "content"}` dicts, in order): each turn adds a user
message (`ask`), the request sends the whole list, and the answer as the server returned it comes back as an
assistant message (`answered`). The list is open to other message kinds (an agent adds assistant tool-call messages
and tool results with `add`); each API shapes it into its own fields (`apis.Api.shape`, its module's).

Alongside, the session counts its tokens as the client's counter does (`history_tokens`), which gives each turn its
expected prompt tokens and its expected prefix reuse: the history is what the previous turn sent and received, so a
prefix cache that keeps a finished request's blocks (vLLM's, SGLang's, the simulator's) holds its whole 512-token
blocks — they count as seen (`RequestRecord.prefix_blocks_seen`).

`DurationDist` is a distribution of seconds (`--think-time-s`: the pause before each later turn).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from llm_locust.workload.lengths import split_distribution
from llm_locust.workload.prefix_blocks import BLOCK_TOKENS

Message = dict[str, Any]
"""One chat message of a history: `{"role": ..., "content": ...}`, or any other kind an API takes (tool calls)."""


@dataclass(slots=True)
class Session:
    """One conversation of `turns` turns (its id `session_id`, sent in `--session-header`): its `messages` so far,
    the turns sent (`turn`, 1-based once the first is asked), and `history_tokens`, the client's count of every
    message's content so far."""

    session_id: str
    turns: int
    messages: list[Message] = field(default_factory=list)
    turn: int = 0
    history_tokens: int = 0

    @property
    def done(self) -> bool:
        """Every turn of the session has been asked."""
        return self.turn >= self.turns

    def ask(self, content: str, tokens: int) -> tuple[list[Message], int, int]:
        """Start the next turn with a user message `content` of `tokens` tokens; return (the messages to send — a
        copy, the history and this message —, the prompt tokens they count, the whole 512-token blocks of the
        history before this message: seen by a prefix cache that kept the previous turn)."""
        seen = self.history_tokens // BLOCK_TOKENS
        self.add({"role": "user", "content": content}, tokens)
        self.turn += 1
        return list(self.messages), self.history_tokens, seen

    def answered(self, text: str, tokens: int) -> None:
        """The answer to the last turn, `text` as the server returned it (`tokens` tokens), joins the history."""
        self.add({"role": "assistant", "content": text}, tokens)

    def add(self, message: Message, tokens: int) -> None:
        """Append any `message` (an agent's tool call or tool result) that counts `tokens` prompt tokens."""
        self.messages.append(message)
        self.history_tokens += tokens


_DURATION_SYNTAX = "S, fixed:S, uniform:MIN,MAX, exponential:MEAN or lognormal:MEAN,SD"


@dataclass(frozen=True, slots=True)
class DurationDist:
    """A distribution of durations in seconds; `sample_s(rng)` returns a float >= 0."""

    kind: str
    a: float  # fixed: S; uniform: MIN; exponential / lognormal: MEAN
    b: float = 0.0  # uniform: MAX; lognormal: SD

    def sample_s(self, rng: random.Random) -> float:
        """One duration, seconds, drawn with `rng`."""
        if self.kind == "fixed" or self.a == 0:
            return self.a
        if self.kind == "uniform":
            return rng.uniform(self.a, self.b)
        if self.kind == "exponential":
            return rng.expovariate(1 / self.a)
        sigma2 = math.log1p((self.b / self.a) ** 2)  # lognormal with this mean and SD of the durations
        return rng.lognormvariate(math.log(self.a) - sigma2 / 2, math.sqrt(sigma2))

    def __str__(self) -> str:
        if self.kind == "fixed":
            return f"{self.a:g}"
        params = (self.a,) if self.kind == "exponential" else (self.a, self.b)
        return f"{self.kind}:" + ",".join(f"{p:g}" for p in params)


def parse_duration(text: str, option: str) -> DurationDist:
    """Parse a distribution of seconds (`DurationDist`); ConfigError naming `option` if invalid."""
    arities = {"fixed": (1,), "uniform": (2,), "exponential": (1,), "lognormal": (2,)}
    kind, values, fail = split_distribution(text, option, arities, _DURATION_SYNTAX)
    if not all(math.isfinite(v) and v >= 0 for v in values):
        raise fail("seconds must be finite and >= 0")
    if kind == "uniform" and values[0] > values[1]:
        raise fail("need MIN <= MAX")
    if kind == "lognormal" and values[0] == 0 and values[1] > 0:
        raise fail("need MEAN > 0")
    return DurationDist(kind, *values)
