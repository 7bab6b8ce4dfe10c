"""Prompts from shared 512-token blocks (workload/prefix_blocks.py): same id, same text; lengths exact; reuse counts."""

from __future__ import annotations

import random
import subprocess
import sys

from harness.tokenizer import build_tokenizer

from llm_locust.workload.prefix_blocks import BLOCK_TOKENS, BlockTexts, ReuseTracker, prompt_from_blocks
from llm_locust.workload.prompts import FRESH_WORDS, POOL_MIN_WORDS, word_pool
from llm_locust.workload.tokens import WordCounter, token_counter


def test_same_ids_give_a_byte_identical_prefix():
    blocks = BlockTexts(WordCounter(), seed=7)
    a, a_tokens = prompt_from_blocks(blocks, [1, 2, 3], 3 * BLOCK_TOKENS - 100, random.Random(1))
    b, b_tokens = prompt_from_blocks(blocks, [1, 2, 9, 10], 4 * BLOCK_TOKENS, random.Random(2))
    assert (a_tokens, b_tokens) == (3 * BLOCK_TOKENS - 100, 4 * BLOCK_TOKENS)
    assert len(a.split()) == a_tokens and len(b.split()) == b_tokens
    shared = len(blocks.text(1)) + 1 + len(blocks.text(2))
    assert a[:shared] == b[:shared] and a[shared:] != b[shared:]
    assert BlockTexts(WordCounter(), seed=8).text(1) != blocks.text(1)  # the seed names the run's blocks
    assert BlockTexts(WordCounter(), seed=7).text(2) == blocks.text(2)  # ... and every process agrees


def test_length_past_the_last_block_and_without_ids():
    blocks = BlockTexts(WordCounter(), seed=None)
    text, tokens = prompt_from_blocks(blocks, [5], BLOCK_TOKENS + 30, random.Random(3))
    assert tokens == BLOCK_TOKENS + 30 == len(text.split()) and text.startswith(blocks.text(5) + " ")
    x, _ = prompt_from_blocks(blocks, [], 40, random.Random(4))
    y, _ = prompt_from_blocks(blocks, [], 40, random.Random(5))
    assert len(x.split()) == 40 and x != y  # without ids prompts are independent


def test_blocks_are_exact_with_a_tokenizer(tmp_path):
    counter = token_counter(str(build_tokenizer(tmp_path / "tokenizer.json")))
    blocks = BlockTexts(counter, seed=1)
    assert counter.count(blocks.text(3)) == BLOCK_TOKENS
    text, tokens = prompt_from_blocks(blocks, [3, 4], 2 * BLOCK_TOKENS - 7, random.Random(1))
    assert tokens == counter.count(text) == 2 * BLOCK_TOKENS - 7


def test_reuse_counts_whole_blocks_seen_before_in_order():
    tracker = ReuseTracker()
    assert tracker.see([1, 2, 3], 3 * BLOCK_TOKENS) == (3, 0)
    assert tracker.see([1, 2, 4], 2 * BLOCK_TOKENS + 10) == (2, 2)  # the cut block 4 is not counted
    assert tracker.see([1, 4], 2 * BLOCK_TOKENS) == (2, 1)  # 4 was only ever cut before
    assert tracker.see([4, 5], 10) == (0, 0)


def test_a_block_is_the_same_text_in_every_process_however_far_its_pool_has_grown():
    """A block is fresh words then a window of the process's word pool placed among its first words: another process
    (whose pool grew for other prompts, or not) builds the same text; two ids' blocks differ from their first words."""
    words = BlockTexts(WordCounter(), seed=3).words
    before = BlockTexts(WordCounter(), seed=3).text(11)
    word_pool(words).reserve(4 * POOL_MIN_WORDS)  # a long prompt grew this process's pool
    assert BlockTexts(WordCounter(), seed=3).text(11) == before
    code = (
        "from llm_locust.workload.prefix_blocks import BlockTexts; from llm_locust.workload.tokens import WordCounter;"
        "print(BlockTexts(WordCounter(), seed=3).text(11), end='')"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert other.stdout == before
    texts = [BlockTexts(WordCounter(), seed=3).text(i) for i in range(200)]
    assert len({tuple(t.split(" ", FRESH_WORDS)[:FRESH_WORDS]) for t in texts}) == 200
    assert all(len(t.split(" ")) == BLOCK_TOKENS for t in texts)
