"""A tokenizer made here, for tests of token counting with a real `tokenizer.json`."""

from __future__ import annotations

import random

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from llm_locust.workload.prompts import VOCABULARY


def build_tokenizer(path, vocab_size=400):
    """A small byte-level BPE tokenizer.json trained here (no download)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    rng = random.Random(1)
    corpus = [" ".join(rng.choices(VOCABULARY[:150], k=50)) for _ in range(200)]
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)  # fmt: skip
    tok.train_from_iterator(corpus, trainer)
    tok.save(str(path))
    return path
