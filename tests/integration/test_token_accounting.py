"""Token accounting: the streamed text counted with --tokenizer against the server's usage, tokens per stream event
and ITL per event, against the simulator's multi-token chunks (`--tokens-per-chunk`)."""

from __future__ import annotations

import orjson
import pytest
from conftest import options, read_summary, run_local
from harness.kept_text import kept_stream
from harness.tokenizer import build_tokenizer
from tokenizers import Tokenizer, models, pre_tokenizers

from llm_locust.metrics.record import RequestRecord, TokenSource
from llm_locust.metrics.stream_text import KEEP_EVENTS
from llm_locust.metrics.window import WindowMetrics
from llm_locust.report.build import build_report
from llm_locust.results.sections import token_accounting, token_warnings
from llm_locust.sim import run_sim
from llm_locust.sim.words import WORDS

K = 4
TOKENS = 33  # the first token alone, then 8 events of 4


def _event(chunk: dict) -> bytes:
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def word_tokenizer(path):
    """A tokenizer.json with one token per simulator word: it agrees with the simulator's usage."""
    vocab = {"[UNK]": 0, **{word.strip(): i for i, word in enumerate(dict.fromkeys(WORDS), start=1)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.save(str(path))
    return path


def test_streamed_text_takes_every_generated_field_and_skips_the_rest():
    events = [
        b": keep-alive\n\n",
        _event({"choices": [{"delta": {"role": "assistant", "content": ""}}]}),
        _event({"choices": [{"delta": {"reasoning_content": "think "}}]}),
        _event({"id": "c", "choices": [{"index": 0, "delta": {"content": "Hello"}}]}),
        _event({"id": "c", "choices": [{"index": 0, "delta": {"content": ' "q"\\é'}}]}),  # the usual chunk: a literal
        _event({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "t", "function": {"name": "f",
                                                                                              "arguments": "{}"}}]}}]}),
        _event({"choices": [], "usage": {"completion_tokens": 3}}),
        _event({"choices": [{"text": " world"}]}),
        b"data: [DONE]\n\n",
        _event({"choices": [{"delta": {"content": "after done"}}]}),
    ]  # fmt: skip
    body = b"".join(events)
    for pieces in ([body[i : i + 7] for i in range(0, len(body), 7)], events):  # split anywhere; an event a piece
        assert streamed_text(pieces) == 'think Hello "q"\\éf{} world'
    assert streamed_text([b"data: [1, 2]\n\n", _event({"choices": "x"}), _event({"choices": [{"delta": 5}]})]) == ""
    hello = _event({"id": "c", "choices": [{"index": 0, "delta": {"content": "Hello"}}]})
    assert streamed_text([hello, b"data: {not json\n\n", hello]) == "Hello"  # the text ends where the stream did
    word = _event({"id": "c", "choices": [{"index": 0, "delta": {"content": " word"}}]})
    long = [word] * (3 * KEEP_EVENTS)  # decoded in batches
    assert streamed_text([*long, b"data: [DONE]\n\n"]) == streamed_text([b"".join(long)]) == " word" * len(long)


def streamed_text(pieces) -> str:
    return kept_stream("chat", pieces, answer=False)[0].text()


def test_client_and_server_counts_are_compared_per_request_and_merged():
    window = WindowMetrics()
    for local, usage in ((10, 10), (12, 10), (9, 10), (10, 10)):
        record = RequestRecord("chat", t_send=0.0, t_first=0.1, t_last=0.2, events=3, finish_reason="stop")
        record.usage_completion_tokens, record.local_output_tokens = usage, local
        window.add(record)
    merged = WindowMetrics.from_wire(window.to_wire())
    merged.merge(WindowMetrics())
    tokens = token_accounting(merged)
    assert tokens["output_tokens_checked"] == 4 and tokens["output_token_mismatches"] == 2
    assert tokens["output_token_mismatch_share"] == 0.5
    assert tokens["output_tokens_mean_diff"] == 0.5 and tokens["output_tokens_mean_abs_diff"] == 1.5
    assert tokens["output_tokens_max_abs_diff"] == 2
    assert tokens["tokens_per_event"] == round(40 / 12, 4) and tokens["itl_per_event"]
    lines = token_warnings(tokens)
    assert "ITL is per event" in lines[0] and "3.33 output tokens" in lines[0]
    assert "on 2 of 4 requests (50.0 %)" in lines[1]

    no_usage = RequestRecord("chat", t_send=0.0, events=3, local_output_tokens=7)
    assert no_usage.output_tokens == 7 and no_usage.token_source == TokenSource.TOKENIZER


@pytest.fixture(scope="module")
def chunky_sim():
    """Fixed timing, ITL 10 ms, 33 tokens sent as 1 + 8 events of 4."""
    with run_sim(
        "--ttft-ms", "20", "--itl-ms", "10", "--output-tokens", str(TOKENS), "--tokens-per-chunk", str(K)
    ) as sim:
        yield sim


def test_multi_token_events_make_itl_per_event_and_say_so(chunky_sim, tmp_path):
    tokenizer = word_tokenizer(tmp_path / "words.json")
    opts = options("--host", chunky_sim.url, "--tokenizer", str(tokenizer), "--results-dir", str(tmp_path / "run"))
    run_local(opts, users=2, seconds=2.0)
    summary = read_summary(tmp_path / "run")
    ok = summary["throughput"]["requests_ok"]
    tokens, metrics = summary["tokens"], summary["metrics"]
    assert ok >= 4 and summary["failures"] == {}
    assert tokens["output_tokens_checked"] == ok and tokens["output_token_mismatches"] == 0  # one token a word
    assert tokens["token_events"] == ok * (1 + (TOKENS - 1) // K)
    assert tokens["tokens_per_event"] == round(TOKENS / (1 + (TOKENS - 1) // K), 4) and tokens["itl_per_event"]
    assert 30 < metrics["itl_ms"]["p50"] < 50  # 4 tokens x 10 ms between events
    assert 7 < metrics["tpot_ms"]["p50"] < 13  # per token: 10 ms
    assert any("ITL is per event" in w and "3.67" in w for w in summary["warnings"])

    report = build_report([tmp_path / "run"], tmp_path / "report.html", png=False)
    html = report.html_path.read_text()
    assert "ITL is per event" in html and "tokens per event" in html

    sent = [r["token_times"] for r in chunky_sim.trace() if not r["cancelled"]]  # the simulator's side
    assert sent and all(len(times) == TOKENS for times in sent)
    chunks = [times[start : start + K] for times in sent for start in range(1, TOKENS, K)]
    assert all(len(set(chunk)) == 1 for chunk in chunks)  # the 4 tokens of an event leave in the same write


def test_the_sdk_client_counts_the_streamed_text_too(chunky_sim, tmp_path):
    tokenizer = word_tokenizer(tmp_path / "words.json")
    opts = options("--host", chunky_sim.url, "--tokenizer", str(tokenizer), "--client", "openai-sdk",
                   "--results-dir", str(tmp_path / "sdk"))  # fmt: skip
    run_local(opts, users=1, seconds=1.5)
    summary = read_summary(tmp_path / "sdk")
    tokens = summary["tokens"]
    assert tokens["output_tokens_checked"] == summary["throughput"]["requests_ok"] >= 1
    assert tokens["output_token_mismatches"] == 0 and tokens["itl_per_event"]


def test_a_tokenizer_that_disagrees_with_the_server_is_reported(chunky_sim, tmp_path):
    tokenizer = build_tokenizer(tmp_path / "bpe.json")  # trained on other words: splits the simulator's
    opts = options("--host", chunky_sim.url, "--tokenizer", str(tokenizer), "--results-dir", str(tmp_path / "bpe"))
    run_local(opts, users=2, seconds=1.0)
    tokens = read_summary(tmp_path / "bpe")["tokens"]
    assert tokens["output_tokens_checked"] >= 1
    assert 0 < tokens["output_token_mismatch_share"] <= 1 and tokens["output_tokens_mean_diff"] > 0
    assert tokens["output_tokens_max_abs_diff"] >= 1 and tokens["sources"] == {"usage": tokens["output_tokens_checked"]}

    opts = options("--host", chunky_sim.url, "--results-dir", str(tmp_path / "none"))  # no --tokenizer: no check
    run_local(opts, users=1, seconds=0.5)
    assert read_summary(tmp_path / "none")["tokens"]["output_tokens_checked"] == 0
