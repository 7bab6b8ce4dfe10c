"""Fault injection for the simulator: which fault (if any) a request gets, drawn once per request.

`--fault KIND=PROBABILITY` (repeatable) gives each kind its probability; one seeded draw per
completion request, when it arrives, picks at most one kind, so a kind at probability P strikes a share P of the
requests (P = 1: every one) and a run with the same seed and the same request order injects the same faults.
Every injected fault is named in the request's trace record (`fault`), so a test can compare what a client
counted with what was injected, exactly.

Kinds applied before the response (`PRE_RESPONSE`): `http_429` (with Retry-After), `http_500`,
`http_503`, `refuse` (the connection is reset before any response byte), `non_sse` (HTTP 200
with a JSON body although a stream was asked for), `slow_headers` (the response starts
`slow_headers_ms` late), `html_502` (HTTP 502 with an HTML page, as a gateway or proxy in front
of the server answers). Kinds applied half-way through a streamed response (`MID_STREAM`: at token
`output_tokens // 2`, the only one of a one-token response, however the timing model groups the tokens:
`stream.FaultGeneration`; a response that is not streamed gets none): `cut` (the HTTP body ends without [DONE] or
finish_reason), `reset` (the connection is reset, SO_LINGER 0), `stream_error` (an OpenAI error object inside the
stream), `bad_json` (a chunk that is not JSON), `stall` (silence for `stall_ms`, then the rest), `huge_chunk` (one
token event carrying `huge_bytes` of text; the response is otherwise valid). A response on a WebSocket suffers those
of them that are no HTTP framing's (`ON_WEBSOCKET`).

`--echo-headers` makes every error answer quote the request's headers (HTTP error bodies, the
`html_502` page, the `stream_error` event), as some servers and gateways do: a client under test
must never print them (they hold its credentials).
"""

from __future__ import annotations

import random
from collections.abc import Iterable

PRE_RESPONSE = ("http_429", "http_500", "http_503", "html_502", "refuse", "non_sse", "slow_headers")
MID_STREAM = ("cut", "reset", "stream_error", "bad_json", "stall", "huge_chunk")
ON_WEBSOCKET = ("reset", "stream_error", "stall", "huge_chunk")
"""The kinds a response on a WebSocket can suffer (`sim.websocket`: the Realtime API's): those of a stream that are no
HTTP framing's (a response drawn for another is served whole, its trace's `fault` None)."""
KINDS = PRE_RESPONSE + MID_STREAM


class FaultSpecError(ValueError):
    """A `--fault` value that cannot be used; the message names it and the fix."""


def parse_fault(text: str) -> tuple[str, float]:
    """Parse `KIND=PROBABILITY` (e.g. "http_429=0.05"); raise FaultSpecError naming the problem."""
    kind, eq, value = text.partition("=")
    kind = kind.strip()
    if kind not in KINDS:
        raise FaultSpecError(f"unknown fault kind {kind!r} in {text!r}: use one of {', '.join(KINDS)}")
    try:
        probability = float(value) if eq else float("nan")
    except ValueError:
        probability = float("nan")
    if not 0.0 <= probability <= 1.0:
        raise FaultSpecError(f"--fault {text!r}: expected {kind}=PROBABILITY with a probability in [0, 1]")
    return kind, probability


class FaultPicker:
    """Draws at most one fault kind per request from the configured probabilities (seeded)."""

    def __init__(self, faults: Iterable[tuple[str, float]], seed: int) -> None:
        self._cumulative: list[tuple[float, str]] = []
        total = 0.0
        for kind, probability in faults:
            if probability > 0:
                total += probability
                self._cumulative.append((total, kind))
        if total > 1.0 + 1e-9:
            raise FaultSpecError(f"--fault probabilities add up to {total:g}; their sum must be at most 1")
        self._random = random.Random(seed)

    @property
    def active(self) -> bool:
        """True when at least one fault kind has a non-zero probability."""
        return bool(self._cumulative)

    def pick(self) -> str | None:
        """The fault kind for the next request, or None (one random draw)."""
        if not self._cumulative:
            return None
        r = self._random.random()
        for bound, kind in self._cumulative:
            if r < bound:
                return kind
        return None
