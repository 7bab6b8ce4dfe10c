"""`StreamText`'s one-pass read of a kept answer, fed by the API's own reader, gives exactly what the API's
`event_text` and `answer_parts` give read one event at a time, on random streams split at random byte boundaries; the
usual chat chunks kept as their content string literals read as their contents."""

from __future__ import annotations

import itertools

import orjson
from harness.kept_text import kept_stream
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_locust.apis import api
from llm_locust.metrics.stream_text import openai_answer, openai_parts, openai_text

_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=12) | st.sampled_from(['"', "\\", "\n", "é漢🙂", ""])
_VALUE = _TEXT | st.none() | st.integers(-(2**63), 2**63 - 1) | st.just([])


def _delta() -> st.SearchStrategy[dict]:
    call = st.fixed_dictionaries({}, optional={"index": st.integers(0, 3), "function": st.fixed_dictionaries(
        {}, optional={"name": _VALUE, "arguments": _VALUE}) | _VALUE})  # fmt: skip
    return st.fixed_dictionaries(
        {},
        optional={
            "content": _VALUE, "reasoning_content": _VALUE, "reasoning": _VALUE, "role": st.just("assistant"),
            "tool_calls": st.lists(call | _VALUE, max_size=2) | _VALUE,
        },
    )  # fmt: skip


_CHAT = st.builds(lambda d: {"choices": [{"index": 0, "delta": d}]}, _delta()) | st.builds(
    lambda t: {"choices": [{"index": 0, "text": t}]}, _VALUE
) | st.sampled_from([{"choices": []}, {"choices": [1]}, {"usage": {"completion_tokens": 3}}])  # fmt: skip
_RESPONSES = st.builds(
    lambda kind, delta: {"type": kind, "delta": delta},
    st.sampled_from(["response.output_text.delta", "response.refusal.delta", "response.reasoning_text.delta",
                     "response.reasoning_summary_text.delta", "response.function_call_arguments.delta",
                     "response.completed"]), _VALUE)  # fmt: skip
_MESSAGES = st.builds(
    lambda kind, delta: {"type": "content_block_delta", "index": 0, "delta": {"type": kind, **delta}},
    st.sampled_from(["text_delta", "thinking_delta", "input_json_delta", "signature_delta"]),
    st.fixed_dictionaries({}, optional={"text": _VALUE, "thinking": _VALUE, "partial_json": _VALUE}))  # fmt: skip
_GEMINI = st.builds(
    lambda parts: {"candidates": [{"content": {"parts": parts, "role": "model"}}]},
    st.lists(st.fixed_dictionaries({}, optional={"text": _VALUE, "thought": st.booleans()}), max_size=3))  # fmt: skip


def _reference(name: str, chunks: list[dict]) -> tuple[str, str, str]:
    """(text, answer text, reasoning text) read one chunk at a time with the API's own two readers."""
    spec = api(name)
    text, content, reasoning = [], [], []
    for chunk in chunks:
        piece = spec.event_text(chunk)  # type: ignore[misc]
        if piece:
            text.append(piece)
            answer, thought = spec.answer_parts(chunk)  # type: ignore[misc]
            content.append(answer or "")
            reasoning.append(thought or "")
    return "".join(text), "".join(content), "".join(reasoning)


def _streamed(name: str, chunks: list[dict], cuts: list[int]) -> tuple[str, str, str]:
    """(text, answer text, reasoning text) kept through the API's reader from the stream's body cut at `cuts`."""
    body = b"".join(b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in chunks) + b"data: [DONE]\n\n"
    bounds = [0, *sorted({min(cut, len(body)) for cut in cuts}), len(body)]
    kept, _record = kept_stream(name, [body[a:b] for a, b in itertools.pairwise(bounds)])
    return (kept.text(), *kept.answer())


_STREAMS = st.sampled_from(
    [("chat", _CHAT), ("completions", _CHAT), ("responses", _RESPONSES), ("messages", _MESSAGES), ("gemini", _GEMINI)]
).flatmap(lambda pair: st.tuples(st.just(pair[0]), st.lists(pair[1], max_size=8)))


@settings(max_examples=300, deadline=None)
@given(_STREAMS, st.lists(st.integers(0, 4000), max_size=6))
def test_one_pass_equals_two_readers(case: tuple[str, list[dict]], cuts: list[int]) -> None:
    name, chunks = case
    for chunk in chunks:  # the reader stops at a chunk its parser refuses: so does the kept text
        _kept, record = kept_stream(name, [b"data: " + orjson.dumps(chunk) + b"\n\n"])
        if not record.ok:
            chunks = chunks[: chunks.index(chunk)]
            break
    assert _streamed(name, chunks, cuts) == _reference(name, chunks)


_USUAL = st.lists(_TEXT.filter(bool), min_size=1, max_size=20)


@settings(max_examples=200, deadline=None)
@given(_USUAL, st.booleans())
def test_the_usual_chat_chunks_kept_as_literals_read_as_their_content(contents: list[str], reasoning: bool) -> None:
    """Usual content chunks, an event a piece, reach `StreamText` as their content string literals (the reader's
    fast path): the kept text and answer are the contents, in order, also around a reasoning chunk."""
    usual = [{"id": "c", "choices": [{"index": 0, "delta": {"content": text}}]} for text in contents]
    chunks = [usual[0], *([{"choices": [{"index": 0, "delta": {"reasoning_content": "hm"}}]}] if reasoning else []),
              *usual[1:]]  # fmt: skip
    pieces = [b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in chunks] + [b"data: [DONE]\n\n"]
    kept, record = kept_stream("chat", pieces)
    assert record.ok and record.events == len(chunks)
    assert (kept.text(), *kept.answer()) == _reference("chat", chunks)


@settings(max_examples=300, deadline=None)
@given(_CHAT)
def test_openai_answer_is_text_then_parts(chunk: dict) -> None:
    """Per chunk, the one-pass reader returns exactly `openai_text` and `openai_parts` (chat and completions use it)."""
    assert openai_answer(chunk) == (openai_text(chunk), *openai_parts(chunk))
