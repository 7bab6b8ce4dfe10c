"""Shared prefixes without a trace (`--prefix-tokens T`, `--prefix-pool N`, `--prefix-zipf S`): many system prompts,
RAG templates or agents, each request starting with one of them.

Prefix k of the pool is the first T tokens of the blocks (k, 0), (k, 1), ... of `prefix_blocks.BlockTexts` (one
text per id for the whole run, the same in every process). Each request draws k uniformly, or with probability
proportional to 1 / (k + 1)^S (Zipf). With N = 1 every request has the same prefix, as `--prefix-tokens` always did.

`draw` also counts the expected reuse as a prefix cache of unbounded capacity sees it (`RequestRecord.prefix_blocks`
/ `prefix_blocks_seen`): the whole 512-token blocks of the prompt and, of those, the prefix's whole blocks when an
earlier request of this process drew the same prefix. In one process this equals what a cold server cache measures;
with M worker processes each one meets a prefix for the first time on its own, so the expected reuse is low by at
most (M - 1) x N x (T // 512) blocks over the run.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from functools import lru_cache
from itertools import accumulate

from llm_locust.workload.prefix_blocks import BLOCK_TOKENS, BlockTexts, ReuseTracker, prompt_from_blocks

_IDS_PER_PREFIX = 1 << 20  # block ids of prefix k: k * _IDS_PER_PREFIX + j (j < ceil(T / 512))
_CACHED_PREFIXES = 256  # prefix texts kept (a large pool is rebuilt from BlockTexts' own cache of blocks)


class PrefixPool:
    """`size` prefixes of `tokens` tokens each, drawn uniformly (`zipf_s` 0) or Zipf-distributed; one per process
    and test, shared by its users (`counts` and the reuse tracker are the process's)."""

    def __init__(self, blocks: BlockTexts, size: int, tokens: int, zipf_s: float = 0.0) -> None:
        self.blocks = blocks
        self.size = size
        self.tokens = tokens
        self._cum_weights = list(accumulate(1.0 / (k + 1) ** zipf_s for k in range(size)))
        self.prefix = lru_cache(maxsize=_CACHED_PREFIXES)(self._prefix)
        self._reuse = ReuseTracker()
        self.counts = [0] * size  # draws of each prefix in this process

    def _prefix(self, k: int) -> tuple[str, int]:
        """Prefix `k`'s (text, counted tokens): `tokens` words of its blocks (exact with the word approximation);
        use `prefix` (cached)."""
        return prompt_from_blocks(self.blocks, self._ids(k), self.tokens, random.Random(0))

    def draw(self, rng: random.Random, rest_tokens: int) -> tuple[str, int, tuple[int, int]]:
        """Pick a prefix for a prompt of `rest_tokens` more tokens; return (its text, its tokens, (whole blocks of
        the prompt, of which seen before))."""
        k = bisect_right(self._cum_weights, rng.random() * self._cum_weights[-1]) if self.size > 1 else 0
        k = min(k, self.size - 1)  # a draw of exactly the total weight
        self.counts[k] += 1
        text, tokens = self.prefix(k)
        _, seen = self._reuse.see(self._ids(k), self.tokens)
        return text, tokens, ((self.tokens + rest_tokens) // BLOCK_TOKENS, seen)

    def _ids(self, k: int) -> list[int]:
        """The block ids of prefix `k` (its last block cut to the tokens left)."""
        return [k * _IDS_PER_PREFIX + j for j in range(-(-self.tokens // BLOCK_TOKENS))]
