"""The simulator's prefix cache: the LRU of 512-token blocks (pure), and its effect on a running simulator."""

from __future__ import annotations

from llm_locust.sim.engine import FixedTiming, Sequence
from llm_locust.sim.latency import Latency
from llm_locust.sim.prefix_cache import PrefixCache
from llm_locust.workload.prefix_blocks import BLOCK_TOKENS


def _words(*blocks: str, extra: int = 0) -> list[str]:
    """One prompt: a whole block of the word `b` for each b in `blocks`, then `extra` words of its own."""
    return [w for b in blocks for w in [b] * BLOCK_TOKENS] + ["tail"] * extra


def test_hits_are_leading_whole_blocks_chained_over_the_prefix() -> None:
    cache = PrefixCache(capacity_blocks=100)
    assert cache.lookup(_words("a", "b", extra=100)) == (2, 0)  # cold: whole blocks counted, a cut one not
    assert cache.lookup(_words("a", "b", "c")) == (3, 2)
    assert cache.lookup(_words("a", "x", "c")) == (3, 1)  # "c" after another block is another block
    assert cache.lookup(_words("b")) == (1, 0)  # the same text at another position misses
    assert cache.lookup(_words(extra=BLOCK_TOKENS - 1)) == (0, 0)


def test_least_recently_used_blocks_go_first() -> None:
    cache = PrefixCache(capacity_blocks=2)
    cache.lookup(_words("a"))
    cache.lookup(_words("b"))
    assert cache.lookup(_words("a")) == (1, 1)  # a is now the most recent
    cache.lookup(_words("c"))  # evicts b
    assert cache.lookup(_words("b")) == (1, 0)
    assert cache.lookup(_words("c")) == (1, 1)


def test_a_finished_requests_prompt_and_answer_blocks_are_stored_for_the_next_turn() -> None:
    cache = PrefixCache(capacity_blocks=100)
    prompt = _words("a", extra=300)
    assert cache.lookup(prompt) == (1, 0)
    cache.store(prompt + ["answer"] * 300)  # the answer completes the cut block: 2 whole blocks
    assert cache.lookup(prompt + ["answer"] * 300 + ["next"] * 600) == (3, 2)
    assert cache.lookup(prompt + ["other"] * 300) == (2, 1)  # another answer: only the prompt's block hits


def test_cached_share_cuts_the_fixed_models_ttft() -> None:
    timing = FixedTiming(Latency("fixed", 200.0), itl_s=0.02)
    seq = Sequence(prompt_tokens=4 * BLOCK_TOKENS, output_tokens=4, t_recv_s=10.0)
    timing.start(seq)
    seq.cached_tokens = 3 * BLOCK_TOKENS
    assert abs(timing.due_s(seq, 0) - 10.05) < 1e-9
    assert abs(timing.due_s(seq, 2) - 10.09) < 1e-9
