"""Prompts made of shared 512-token blocks: the same block id is always the same text, whatever the request.

Traces such as Mooncake's describe each prompt by the ids of its 512-token KV-cache blocks (`hash_ids`): two
requests that share ids share a prefix. `BlockTexts.text(block_id)` is the block's text — `BLOCK_TOKENS` words of the
prompt vocabulary: `FRESH_WORDS` drawn from an RNG seeded with (seed, id), then a window of the process's `WordPool`
placed by the same RNG among the pool's first words (the same in every process) — so two prompts sharing ids are
byte-identical over those blocks and a real server's prefix cache hits as it did in production, while two ids'
blocks differ from their first words (a new block costs ~10 µs: drawn word by word it cost ~40, and a trace's prompt
brings up to tens of new ones on the loop that sends every other user's requests on time). With a `--tokenizer`,
only words that are one token both at the start of a text and after a space are used, so a block is exactly
`BLOCK_TOKENS` tokens for tokenizers that do not merge across spaces (the prompt's count is still the tokenizer's
verdict on the whole text).

`prompt_from_blocks` builds a prompt of a given length from ids (the last block cut short, or words past the last
block added from the request's own RNG); `ReuseTracker` counts, in trace order, the whole blocks of each prompt and
how many of them were seen before (`RequestRecord.prefix_blocks` / `prefix_blocks_seen`: expected reuse = seen /
blocks with an unbounded cache).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from functools import lru_cache

from llm_locust.workload.prompts import FRESH_WORDS, POOL_MIN_WORDS, leading_words, single_token_words, word_pool
from llm_locust.workload.tokens import TokenCounter

BLOCK_TOKENS = 512
"""Tokens per block (Mooncake's hash_ids, and the KV-cache block the simulator's prefix cache counts)."""
_CACHED_BLOCKS = 4096  # ~10 MB of block texts; a miss costs ~10 µs (`BlockTexts._text`)


class BlockTexts:
    """The text of each block id for one run (`seed`), counted with `counter`."""

    def __init__(self, counter: TokenCounter, seed: int | None) -> None:
        self.counter = counter
        self.seed = seed or 0
        words = single_token_words(counter)
        leading = set(leading_words(counter, words))
        self.words = [w for w in words if w in leading] or words
        self._pool = word_pool(self.words)
        self._pool.reserve(POOL_MIN_WORDS)
        self.text = lru_cache(maxsize=_CACHED_BLOCKS)(self._text)

    def _text(self, block_id: int) -> str:
        """`BLOCK_TOKENS` words, the same for the same (seed, block id) in every process; use `text` (cached)."""
        rng = random.Random(f"block/{self.seed}/{block_id}")
        fresh = " ".join(rng.choices(self.words, k=FRESH_WORDS))
        return f"{fresh} {self._pool.window(BLOCK_TOKENS - FRESH_WORDS, rng, within=POOL_MIN_WORDS)}"


def prompt_from_blocks(
    blocks: BlockTexts, hash_ids: Sequence[int], tokens: int, rng: random.Random
) -> tuple[str, int | None]:
    """A prompt of `tokens` tokens whose i-th 512-token block is the text of `hash_ids[i]`.

    The last block used is cut to the tokens left; tokens past the last id are words drawn from `rng` (independent
    of other requests). Returns (text, tokens counted: exact with the word approximation; with a tokenizer its count
    of the whole text).
    """
    parts = []
    left = tokens
    for block_id in hash_ids:
        if left <= 0:
            break
        text = blocks.text(block_id)
        if left < BLOCK_TOKENS:
            text = " ".join(text.split(" ", left)[:left])
        parts.append(text)
        left -= min(left, BLOCK_TOKENS)
    if left > 0:
        parts.append(" ".join(rng.choices(blocks.words, k=left)))
    text = " ".join(parts)
    if blocks.counter.exact_words:
        return text, tokens
    return text, blocks.counter.count(text)


class ReuseTracker:
    """Counts prefix reuse in request order, as a prefix cache of unbounded capacity would see it."""

    def __init__(self) -> None:
        self._seen: set[int] = set()

    def see(self, hash_ids: Sequence[int], tokens: int) -> tuple[int, int]:
        """Count one request of `tokens` prompt tokens made of `hash_ids`; return (its whole blocks, of which were
        seen as whole blocks in an earlier request). A cut last block is not counted (a block cache holds only
        whole blocks)."""
        whole = hash_ids[: min(len(hash_ids), max(0, tokens) // BLOCK_TOKENS)]
        seen = sum(1 for block_id in whole if block_id in self._seen)
        self._seen.update(whole)
        return len(whole), seen
