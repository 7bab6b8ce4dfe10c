"""Extract a GGUF model's tokenizer into a `tokenizer.json` that the `tokenizers` package loads.

Usage: python gguf_tokenizer.py MODEL.gguf OUT/tokenizer.json. Runs in the engine cache's helper
venv (`gguf` + `tokenizers`), offline. It rebuilds a byte-level BPE tokenizer (GGUF
`tokenizer.ggml.model` = gpt2, the SmolLM2 family) from the file's vocabulary, merges, token types
and pre-tokenizer name, the way llama.cpp tokenizes: the engine tier checks that its ids equal the
server's /tokenize. transformers' GGUF reader is not used: from transformers 5 it needs torch.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gguf import GGUFReader
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

CONTROL = 3  # llama.cpp's token type of special tokens such as <|im_start|>

# llama.cpp's `tokenizer.ggml.pre` -> the pre-tokenizer it stands for (llama-vocab.cpp's regexes).
PRE_TOKENIZERS = {
    "gpt2": lambda: pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    # SmolLM: every digit alone, then GPT-2's split.
    "smollm": lambda: pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    ),
}


def field(reader: GGUFReader, key: str) -> object:
    """The value of metadata `key` (a str, a number or a list); KeyError names a missing key."""
    if key not in reader.fields:
        raise KeyError(f"{key} is missing from the GGUF metadata")
    return reader.fields[key].contents()


def build(model: Path) -> Tokenizer:
    """The byte-level BPE tokenizer that `model` (a .gguf file) describes; ValueError if it is another kind."""
    reader = GGUFReader(str(model))
    kind, pre = field(reader, "tokenizer.ggml.model"), field(reader, "tokenizer.ggml.pre")
    if kind != "gpt2" or pre not in PRE_TOKENIZERS:
        raise ValueError(
            f"{model}: tokenizer {kind!r} with pre-tokenizer {pre!r} is not supported (gpt2 + {list(PRE_TOKENIZERS)})"
        )
    tokens: list[str] = field(reader, "tokenizer.ggml.tokens")  # type: ignore[assignment]
    types: list[int] = field(reader, "tokenizer.ggml.token_type")  # type: ignore[assignment]
    merges = [tuple(merge.split(" ", 1)) for merge in field(reader, "tokenizer.ggml.merges")]  # type: ignore[attr-defined]
    vocab = {token: index for index, token in enumerate(tokens)}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    tokenizer.pre_tokenizer = PRE_TOKENIZERS[pre]()
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.add_special_tokens(
        [
            AddedToken(token, special=True, normalized=False)
            for token, kind in zip(tokens, types, strict=True)
            if kind == CONTROL
        ]
    )
    return tokenizer


if __name__ == "__main__":
    build(Path(sys.argv[1])).save(sys.argv[2])
