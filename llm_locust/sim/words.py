"""The fixed, varied word list the simulator "generates": one word (with a leading space) per token."""

from __future__ import annotations

WORDS: tuple[str, ...] = tuple(
    " " + word
    for word in """
    the model answers with a steady stream of words while the load test measures every gap between
    them latency throughput token batch queue prefill decode engine request response server client
    river mountain forest ocean desert valley island harbor bridge tower garden meadow canyon glacier
    quick slow bright dark quiet loud gentle sharp smooth rough warm cold early late simple complex
    runs jumps reads writes builds breaks carries follows guides holds keeps leaves moves opens shows
    apple bread cheese lemon olive pepper honey salt sugar tea coffee water milk rice bean onion
    one two three four five six seven eight nine ten hundred thousand million first second third
    red green blue yellow purple orange silver golden white black gray brown amber violet crimson
    because although however therefore meanwhile perhaps indeed often rarely always never sometimes
    engineer scientist teacher student pilot doctor farmer painter writer singer sailor builder
    measure estimate compare observe predict explain describe improve reduce increase balance
    window door table chair lamp clock mirror carpet shelf candle pillow blanket basket bottle
    """.split()
)
"""Every token's text; index with (request offset + token index) % len(WORDS)."""


def word_offset(response_id: str) -> int:
    """The index in `WORDS` of the first word the response `response_id` (`<prefix>-<number>`) generates: varied by
    its request number."""
    return (int(response_id.rsplit("-", 1)[1]) * 37) % len(WORDS)
