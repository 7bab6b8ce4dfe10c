"""The simulator's prefix cache: an LRU of 512-token KV-cache blocks, as vLLM's automatic prefix caching counts them.

A prompt (its words: the simulator counts one token per word) is cut into whole blocks of `BLOCK_TOKENS`; block i is
named by a hash chained over blocks 0..i, so a block hits only when the whole prefix up to it was seen before. A
request's hits are its leading blocks found in the cache; then every whole block of it is stored (most recent last)
and the least recently used blocks beyond `capacity_blocks` are dropped. A cut last block is never cached. When the
request has finished, the whole blocks of its prompt and generated text together are stored too (`store`), as vLLM
caches the blocks its decode fills and SGLang's radix cache a finished request: the next turn of a conversation,
which sends that history back, hits them.
"""

from __future__ import annotations

from collections import OrderedDict

BLOCK_TOKENS = 512
"""Tokens per cached block: vLLM's block size for prefix caching, and the client's shared prefix block
(`workload.prefix_blocks.BLOCK_TOKENS`, kept equal by tests/unit/sim/test_sim_units.py)."""


class PrefixCache:
    """LRU of at most `capacity_blocks` blocks; `lookup` answers and updates it in request-arrival order."""

    def __init__(self, capacity_blocks: int) -> None:
        self.capacity_blocks = capacity_blocks
        self._blocks: OrderedDict[int, None] = OrderedDict()

    def lookup(self, words: list[str]) -> tuple[int, int]:
        """Count one prompt of `words` (one token each); return (its whole blocks, of which leading cache hits)."""
        blocks = self._blocks
        hits = 0
        leading = True
        key = 0
        whole = len(words) // BLOCK_TOKENS
        for index in range(whole):
            key = hash((key, " ".join(words[index * BLOCK_TOKENS : (index + 1) * BLOCK_TOKENS])))
            if key in blocks:
                blocks.move_to_end(key)
                hits += leading
            else:
                leading = False
                blocks[key] = None
        self._evict()
        return whole, hits

    def store(self, words: list[str]) -> None:
        """Store every whole block of a finished request's prompt and generated text, `words` (one token each)."""
        blocks = self._blocks
        key = 0
        for index in range(len(words) // BLOCK_TOKENS):
            key = hash((key, " ".join(words[index * BLOCK_TOKENS : (index + 1) * BLOCK_TOKENS])))
            blocks[key] = None
            blocks.move_to_end(key)
        self._evict()

    def _evict(self) -> None:
        """Drop the least recently used blocks beyond the capacity."""
        blocks = self._blocks
        while len(blocks) > self.capacity_blocks:
            blocks.popitem(last=False)
