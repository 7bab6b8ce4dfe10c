"""The Anthropic Messages API, embeddings and rerank against llama.cpp's server: every request succeeds, the
client's token counts equal the server's usage and its `llamacpp:` counters, prompt lengths equal --tokenizer's.

(The Responses API runs with chat and completions in `test_runs.RUNS`.) Messages has no field that forces the
output length (llama.cpp's `ignore_eos` still stops at the chat template's end of turn), so its outputs are at
most --max-tokens long, not exactly. Each run is --max-requests long: the server's counters grow by exactly
what the client counted.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import pytest
from harness.tap import Tap

from engine.server import run_llama_server
from engine_tier.conftest import EngineRun, run_against

pytestmark = pytest.mark.engine

USAGE = re.compile(r'"output_tokens":(\d+)')  # the last in a stream is message_delta's
REQUESTS = 6
MAX_TOKENS = 16
PROMPT_TOKENS = 40
BATCH = 4
RERANK_TEXT_TOKENS = 16  # the query and each document: 4 pairs of 32 tokens a request (~5 s on one thread)


class Stream(NamedTuple):
    """What llama.cpp streamed for one Messages request."""

    deltas: int
    tokens: int


def common(engine, prompt_tokens: int = PROMPT_TOKENS) -> list[str]:
    return ["--max-requests", str(REQUESTS), "-t", "60s", "--max-tokens", str(MAX_TOKENS), "--seed", "1",
            "--prompt-tokens", str(prompt_tokens), "--tokenizer", str(engine.tokenizer), "-u", "2", "-r", "2",
            "--server-family", "llamacpp"]  # fmt: skip


@pytest.fixture(scope="module")
def messages_run(engine, llama, tmp_path_factory) -> tuple[EngineRun, list[Stream]]:
    """The run through a tap, with what the server streamed: (content_block_delta events, usage.output_tokens)
    of each request."""
    with Tap(llama.url) as tap:
        run = run_against(llama, engine, "messages.py", tmp_path_factory.mktemp("messages"), *common(engine),
                          host=tap.url)  # fmt: skip
    streamed = b"".join(tap.received).decode()
    return run, [
        Stream(stream.count("event: content_block_delta\n"), int(USAGE.findall(stream)[-1]))
        for stream in streamed.split("event: message_start\n")[1:]
    ]


@pytest.fixture(scope="module")
def embeddings_run(engine, tmp_path_factory) -> EngineRun:
    folder = tmp_path_factory.mktemp("embeddings")
    with run_llama_server(engine, folder / "llama-server.log", "--embeddings", "--pooling", "mean") as server:
        return run_against(server, engine, "embeddings.py", folder / "run", *common(engine),
                           "--embedding-batch", str(BATCH))  # fmt: skip


@pytest.fixture(scope="module")
def rerank_run(engine, tmp_path_factory) -> EngineRun:
    # SmolLM2 has no relevance head: with --reranking (rank pooling) llama.cpp scores each (query, document) pair by
    # the first component of its last token's hidden state — meaningless scores, the server's real path and usage
    folder = tmp_path_factory.mktemp("rerank")
    with run_llama_server(engine, folder / "llama-server.log", "--reranking") as server:
        return run_against(server, engine, "rerank.py", folder / "run", *common(engine, RERANK_TEXT_TOKENS),
                           "--embedding-batch", str(BATCH))  # fmt: skip


def test_messages_usage_equals_the_servers_counters(messages_run):
    run, streams = messages_run
    assert run.done.returncode == 0, run.done.stderr[-3000:]
    summary, tokens, throughput = run.summary, run.summary["tokens"], run.summary["throughput"]
    assert summary["status"] == "complete" and summary["failures"] == {}
    assert throughput["requests_ok"] == REQUESTS
    lengths = summary["metrics"]["output_tokens"]
    assert lengths["min"] >= 1 and lengths["max"] <= MAX_TOKENS
    # message_delta's usage.output_tokens for every request; one content_block_delta per token, except where
    # llama.cpp sent fewer: the end-of-turn token of an output that stopped before max_tokens (counted, never
    # streamed) and a character of several byte tokens (held back until whole: "🌟" is one delta of 4 tokens) —
    # the client counted each delta the server sent, and each request whose deltas were fewer than its usage
    assert tokens["sources"] == {"usage": REQUESTS}
    assert run.server_delta("tokens_predicted_total") == throughput["output_tokens"]
    assert len(streams) == REQUESTS and all(1 <= stream.deltas <= stream.tokens for stream in streams)
    assert throughput["output_tokens"] == sum(stream.tokens for stream in streams)
    assert tokens["token_events"] == sum(stream.deltas for stream in streams)
    assert tokens["usage_event_mismatches"] == sum(stream.deltas != stream.tokens for stream in streams)
    # message_start's input_tokens + cache_read_input_tokens: every prompt token the server saw
    prompt_seen = run.server_delta("prompt_tokens_total") + run.server_delta("prompt_tokens_cached_total")
    assert prompt_seen == throughput["prompt_tokens"]
    assert tokens["prompt_tokens_checked"] == REQUESTS  # the chat template's tokens on top of --tokenizer's count
    assert summary["metrics"]["ttfo_ms"]["count"] == REQUESTS
    assert summary["metrics"]["itl_ms"]["count"] == tokens["token_events"] - REQUESTS


def test_embeddings_usage_equals_the_tokenizers_count(embeddings_run):
    run = embeddings_run
    assert run.done.returncode == 0, run.done.stderr[-3000:]
    summary, tokens, throughput = run.summary, run.summary["tokens"], run.summary["throughput"]
    assert summary["status"] == "complete" and summary["failures"] == {}
    assert throughput["requests_ok"] == REQUESTS and throughput["inputs"] == REQUESTS * BATCH
    # usage.prompt_tokens of each request = --tokenizer's count of its inputs (no template, no BOS for SmolLM2)
    assert tokens["prompt_tokens_checked"] == REQUESTS and tokens["prompt_token_mismatches"] == 0
    assert throughput["prompt_tokens"] == REQUESTS * BATCH * PROMPT_TOKENS
    metrics = summary["metrics"]
    assert metrics["e2e_ms"]["count"] == REQUESTS and metrics["ttft_ms"]["count"] == 0
    assert throughput["inputs_per_s"] > 0 and throughput["input_tokens_per_s"] > 0


def test_rerank_documents_and_usage_equal_the_servers(rerank_run):
    run = rerank_run
    assert run.done.returncode == 0, run.done.stderr[-3000:]
    summary, throughput = run.summary, run.summary["throughput"]
    assert summary["status"] == "complete" and summary["failures"] == {}
    assert throughput["requests_ok"] == REQUESTS and throughput["inputs"] == REQUESTS * BATCH
    # usage.prompt_tokens: the query's tokens with each document's (no BOS, EOS or SEP for SmolLM2), each text
    # --prompt-tokens long by --tokenizer; the server's own counter grew by as many
    assert throughput["prompt_tokens"] == REQUESTS * BATCH * 2 * RERANK_TEXT_TOKENS
    prompt_seen = run.server_delta("prompt_tokens_total") + run.server_delta("prompt_tokens_cached_total")
    assert prompt_seen == throughput["prompt_tokens"]
    metrics = summary["metrics"]
    assert metrics["e2e_ms"]["count"] == REQUESTS and metrics["ttft_ms"]["count"] == 0
    assert throughput["inputs_per_s"] > 0 and throughput["input_tokens_per_s"] > 0
