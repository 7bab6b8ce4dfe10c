"""The tokenizer extracted from the GGUF (engine/gguf_tokenizer.py) tokenizes like the server."""

from __future__ import annotations

import random

import pytest

from llm_locust.workload.prompts import PromptMaker
from llm_locust.workload.tokens import token_counter

pytestmark = pytest.mark.engine

TEXTS = [
    "Hello world",
    " leading space, trailing space ",
    "Numbers: 7, 42, 2026 and 3.14159 or 1,000,000.",
    "Tabs\tand\nnew\n\nlines\r\n",
    "Punctuation!?... (brackets) [more] {braces} 'quotes' \"double\" -- dashes",
    "Unicode: café, naïve, 東京, emoji 🦙🦙, Ünïcödé",
    "code: def f(x):\n    return x ** 2  # square",
    "<|im_start|>user\nspecial tokens stay whole<|im_end|>",
]


def test_extracted_tokenizer_gives_the_servers_token_ids(engine, llama):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(engine.tokenizer))
    maker = PromptMaker(token_counter(str(engine.tokenizer)), random.Random(7))
    texts = TEXTS + [maker.prompt(n)[0] for n in (1, 16, 100)]
    for text in texts:
        server_ids = llama.post("/tokenize", {"content": text})["tokens"]
        assert tokenizer.encode(text, add_special_tokens=False).ids == server_ids, text


def test_synthetic_prompts_have_the_sampled_length_on_the_server(engine, llama):
    counter = token_counter(str(engine.tokenizer))
    maker = PromptMaker(counter, random.Random(11))
    for tokens in (1, 8, 64, 300):
        text, counted = maker.prompt(tokens)
        assert counted == tokens
        assert len(llama.post("/tokenize", {"content": text})["tokens"]) == tokens
