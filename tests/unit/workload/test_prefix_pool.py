"""--prefix-pool / --prefix-zipf (workload/prefix_pool.py), the reuse buckets and the options' errors (pure)."""

from __future__ import annotations

import math
import random

import pytest
from conftest import options

from llm_locust.config.settings import Settings
from llm_locust.errors import ConfigError
from llm_locust.metrics.record import reuse_group
from llm_locust.workload.prefix_blocks import BLOCK_TOKENS, BlockTexts
from llm_locust.workload.prefix_pool import PrefixPool
from llm_locust.workload.tokens import WordCounter


def test_prefixes_are_distinct_fixed_texts_and_count_their_reuse() -> None:
    pool = PrefixPool(BlockTexts(WordCounter(), seed=1), size=3, tokens=2 * BLOCK_TOKENS + 100)
    texts = {pool.prefix(k)[0] for k in range(3)}
    assert len(texts) == 3 and all(len(t.split()) == 2 * BLOCK_TOKENS + 100 for t in texts)
    again = PrefixPool(BlockTexts(WordCounter(), seed=1), size=3, tokens=2 * BLOCK_TOKENS + 100)
    assert again.prefix(2) == pool.prefix(2)  # every process builds the same prefixes
    rng = random.Random(5)
    first_seen: set[str] = set()
    for _ in range(50):
        text, tokens, (blocks, seen) = pool.draw(rng, rest_tokens=BLOCK_TOKENS)
        assert tokens == 2 * BLOCK_TOKENS + 100 and blocks == 3  # (1124 + 512) // 512 whole blocks in the prompt
        assert seen == (2 if text in first_seen else 0)  # the prefix's 2 whole blocks, once drawn before
        first_seen.add(text)
    assert sum(pool.counts) == 50 and len(first_seen) == 3


def test_uniform_and_zipf_draws_within_four_sigma() -> None:
    draws = 20_000
    for s in (0.0, 1.0):
        pool = PrefixPool(BlockTexts(WordCounter(), seed=None), size=4, tokens=8, zipf_s=s)
        rng = random.Random(11)
        for _ in range(draws):
            pool.draw(rng, rest_tokens=1)
        weights = [1 / (k + 1) ** s for k in range(4)]
        for k, count in enumerate(pool.counts):
            p = weights[k] / sum(weights)
            assert abs(count - draws * p) < 4 * math.sqrt(draws * p * (1 - p)), (s, k, pool.counts)


def test_reuse_buckets() -> None:
    labels = [reuse_group(4, seen)[1] for seen in range(5)]
    assert labels == ["0%", "25-49%", "50-74%", "75-99%", "100%"]
    assert reuse_group(100, 1) == ("reuse", "1-24%") and reuse_group(3, 2) == ("reuse", "50-74%")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--prefix-pool", "0"), "--prefix-pool must be >= 1, got 0"),
        (("--prefix-pool", "4"), "--prefix-pool 4 needs --prefix-tokens T"),
        (("--prefix-tokens", "8", "--prefix-zipf", "-1"), "--prefix-zipf must be >= 0, got -1.0"),
        (("--session-header", "X Session"), "--session-header 'X Session': expected a header name"),
    ],
)
def test_bad_prefix_and_session_options_are_one_line_errors(args: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        Settings.from_options(options("--host", "http://127.0.0.1:1", *args))
    assert str(e.value).startswith(message) and "\n" not in str(e.value)
