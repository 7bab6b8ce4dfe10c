"""Prompt-length buckets: each request's input length into a power-of-two bucket of the "prompt_tokens" breakdown.

The input length of a request is the server's usage.prompt_tokens when it sent one, else the client's own count
(`expected_prompt_tokens`: exact with --tokenizer, approximate without). Buckets are powers of two,
[2^k, 2^(k+1) - 1] tokens, labelled "512-1023" (1 is "1-1"); a request whose length is unknown counts in none.
The breakdown (`recorder.GroupKey`) keeps one histogram set per bucket, never every request.
"""

from __future__ import annotations

from llm_locust.metrics.record import RequestRecord

DIMENSION = "prompt_tokens"
"""The breakdown's dimension in summary.json's "breakdowns"."""

PROMPT_LENGTHS_EXACT = "exact: counted with --tokenizer"
PROMPT_LENGTHS_APPROXIMATE = (
    "approximate: without --tokenizer a prompt of N tokens is N words; the server's usage.prompt_tokens, where "
    "given, is each request's real length"
)
"""summary.json's load.prompt_lengths: how exact the requested prompt lengths are."""


def bucket_label(tokens: int) -> str:
    """The bucket of a length >= 1 in tokens: `"512-1023"` for 512..1023."""
    low = 1 << (max(tokens, 1).bit_length() - 1)
    return f"{low}-{2 * low - 1}"


def input_tokens(record: RequestRecord) -> int | None:
    """The request's input length in tokens: the server's count, else the client's; None when neither is known."""
    return record.prompt_tokens if record.prompt_tokens is not None else record.expected_prompt_tokens


def add_prompt_group(record: RequestRecord) -> None:
    """Put `record` in its prompt-length bucket (nothing when its length is unknown)."""
    tokens = input_tokens(record)
    if tokens is not None and tokens > 0:
        record.groups = (*record.groups, (DIMENSION, bucket_label(tokens)))
