"""Counting prompt tokens on the client: a local Hugging Face tokenizer, or the word approximation.

`--tokenizer PATH/tokenizer.json` loads a `tokenizers` tokenizer (no download, no chat template;
special tokens such as BOS are not counted). Without it, a token is a whitespace-separated word:
exact on the built-in simulator, ~1 token per common English word for BPE tokenizers.
"""

from __future__ import annotations

import os
from functools import lru_cache

from llm_locust.errors import ConfigError
from llm_locust.metrics.stream_text import TokenCounter


class WordCounter:
    """The approximation: one token per whitespace-separated word (what the simulator counts)."""

    exact_words = True

    def count(self, text: str) -> int:
        """Number of whitespace-separated words in `text`."""
        return len(text.split())


class HFTokenCounter:
    """Counts with a Hugging Face `tokenizers` tokenizer, special tokens excluded."""

    exact_words = False

    def __init__(self, tokenizer: object) -> None:
        self._encode = tokenizer.encode  # type: ignore[attr-defined]

    def count(self, text: str) -> int:
        """Number of tokens of `text` (no BOS/EOS)."""
        return len(self._encode(text, add_special_tokens=False).ids)


def token_counter(tokenizer_path: str) -> TokenCounter:
    """The counter for `--tokenizer` ('' = the word approximation); loaded once per process."""
    return _load_hf(tokenizer_path) if tokenizer_path else WordCounter()


@lru_cache(maxsize=4)
def _load_hf(path: str) -> HFTokenCounter:
    """Load tokenizer.json; ConfigError naming --tokenizer if it cannot be read."""
    from tokenizers import Tokenizer

    if not os.path.isfile(path):
        raise ConfigError(f"--tokenizer {path}: no such file (give the path of a tokenizer.json)")
    try:
        return HFTokenCounter(Tokenizer.from_file(path))
    except Exception as e:  # the Rust side raises plain Exception for bad files
        reason = " ".join(str(e).split())[:200]
        raise ConfigError(f"--tokenizer {path}: not a Hugging Face tokenizer.json ({reason})") from None
