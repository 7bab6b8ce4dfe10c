"""The OpenAI chunk interpreter and the per-request metric definitions."""

import dataclasses

import orjson
import pytest

from llm_locust.metrics.protocol import EventStream, TokenChunks, apply_event, finish
from llm_locust.metrics.record import ErrorKind, RequestRecord, TokenSource


def chat(delta=None, finish_reason=None, usage=None, choices=True):
    chunk = {"id": "c1", "object": "chat.completion.chunk"}
    chunk["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason}] if choices else []
    if usage is not None:
        chunk["usage"] = usage
    return orjson.dumps(chunk)


def feed(record, events):
    for t, data in events:
        if apply_event(record, data, t):
            break
    return finish(record, 99.0)


def test_role_and_usage_chunks_are_not_tokens_and_usage_sets_the_count():
    r = feed(
        RequestRecord("chat", t_send=10.0),
        [
            (10.1, chat({"role": "assistant", "content": ""})),
            (10.2, chat({"content": "Hello"})),
            (10.25, chat({"content": " world"})),
            (10.35, chat({"content": "!"}, finish_reason="stop")),
            (10.36, chat(usage={"prompt_tokens": 5, "completion_tokens": 4}, choices=False)),
            (10.37, b"[DONE]"),
        ],
    )
    assert r.ok and r.saw_done and r.finish_reason == "stop"
    assert r.t_first == 10.2 and r.t_last == 10.35 and r.t_done == 99.0
    assert abs(r.ttft_s - 0.2) < 1e-9 and abs(r.e2e_s - 0.35) < 1e-9
    assert r.events == 3 and r.output_tokens == 4 and r.token_source is TokenSource.USAGE
    assert abs(r.tpot_s - 0.15 / 3) < 1e-9
    assert list(r.itl_us) == [50000, 100000]
    assert r.prompt_tokens == 5


def test_reasoning_counts_for_ttft_but_not_ttfo_and_tool_calls_count():
    r = feed(
        RequestRecord("chat", t_send=0.0),
        [
            (0.1, chat({"reasoning_content": "hmm"})),
            (0.2, chat({"reasoning": "more"})),
            (0.3, chat({"tool_calls": [{"index": 0, "function": {"name": "f"}}]}, finish_reason="tool_calls")),
        ],
    )
    assert r.ok and r.t_first == 0.1 and r.t_first_content == 0.3 and r.events == 3
    assert r.token_source is TokenSource.EVENTS and r.output_tokens == 3


def test_text_completion_chunks():
    def text(t, fr=None):
        return orjson.dumps({"object": "text_completion", "choices": [{"text": t, "finish_reason": fr}]})

    r = feed(RequestRecord("completions", 0.0), [(0.1, text("a")), (0.2, text("")), (0.3, text("b", "length"))])
    assert r.ok and r.events == 2 and r.t_first_content == 0.1 and r.t_last == 0.3


def test_failures_by_kind():
    err = feed(RequestRecord("chat", 0.0), [(0.1, chat({"content": "a"})), (0.2, b'{"error": {"message": "boom"}}')])
    assert err.error_kind is ErrorKind.STREAM_ERROR and "boom" in err.error_message
    bad = feed(RequestRecord("chat", 0.0), [(0.1, b"{not json")])
    assert bad.error_kind is ErrorKind.BAD_STREAM
    cut = feed(RequestRecord("chat", 0.0), [(0.1, chat({"content": "a"}))])
    assert cut.error_kind is ErrorKind.INCOMPLETE
    empty = feed(
        RequestRecord("chat", 0.0), [(0.1, chat({"role": "assistant"}, finish_reason="stop")), (0.2, b"[DONE]")]
    )
    assert empty.error_kind is ErrorKind.NO_TOKENS
    assert not (err.ok or bad.ok or cut.ok or empty.ok)


def test_tpot_needs_two_tokens():
    r = feed(RequestRecord("chat", 0.0), [(0.1, chat({"content": "a"}, finish_reason="stop")), (0.2, b"[DONE]")])
    assert r.ok and r.output_tokens == 1 and r.tpot_s is None and len(r.itl_us) == 0


# -- TokenChunks: the usual token chunk applied without a JSON decode ---------------------------
def _chat(content_json: bytes, finish: bytes = b"null", extra: bytes = b"", rid: bytes = b"c1") -> bytes:
    head = b'{"id":"%s","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,' % rid
    return head + b'"delta":{"content":%s}%s,"logprobs":null,"finish_reason":%s}]}' % (content_json, extra, finish)


STREAMS = {
    "sim-like, escapes and unicode": [
        b'{"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}',
        _chat(b'"Hello"'),
        _chat(b'" wor\\"ld"'),
        _chat(b'"\\\\"'),
        _chat(b'"\\u00e9t\\u00e9"'),
        _chat(b'" x"'),
        _chat(b'""'),  # empty content: no token
        _chat(b'"!"'),
        _chat(b'" end"', finish=b'"length"'),
        b'{"id":"c1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":7}}',
        b"[DONE]",
    ],
    "reasoning then content, tool calls": [
        b'{"id":"r","choices":[{"index":0,"delta":{"reasoning_content":"think"},"finish_reason":null}]}',
        b'{"id":"r","choices":[{"index":0,"delta":{"reasoning_content":"more"},"finish_reason":null}]}',
        _chat(b'"A"', rid=b"r"),
        _chat(b'"B"', rid=b"r"),
        b'{"id":"r","choices":[{"index":0,"delta":{"reasoning_content":"late"},"finish_reason":null}]}',
        _chat(b'"C"', rid=b"r"),
        b'{"id":"r","choices":[{"index":0,"delta":{"tool_calls":[{"index":0}]},"finish_reason":null}]}',
        _chat(b'"D"', rid=b"r"),
        _chat(b'"E"', finish=b'"stop"', rid=b"r"),
        b"[DONE]",
    ],
    "per-chunk padding (OpenAI obfuscation) never matches": [
        _chat(b'"a"', extra=b',"obfuscation":"x1"'),
        _chat(b'"b"', extra=b',"obfuscation":"yy2"'),
        _chat(b'"c"', extra=b',"obfuscation":"z3"', finish=b'"stop"'),
        b"[DONE]",
    ],
    "an error object and a broken chunk after token chunks": [
        _chat(b'"a"'),
        _chat(b'"b"'),
        _chat(b'"c'),  # same bytes around a string that does not close
        _chat(b'"d"'),
    ],
    "content then an error in the stream": [
        _chat(b'"a"'),
        _chat(b'"b"'),
        b'{"id":"c1","error":{"message":"overloaded"}}',
        _chat(b'"c"'),
    ],
    "two keys in one delta": [
        _chat(b'"a"'),
        _chat(b'"b","reasoning":"r"'),
        _chat(b'"","tool_calls":[1]'),
        _chat(b'"c"'),
        b"[DONE]",
    ],
}


@pytest.mark.parametrize("name", list(STREAMS))
def test_token_chunks_give_the_same_record_as_decoding_every_chunk(name):
    records = []
    for chunks in (None, TokenChunks()):
        record = RequestRecord(endpoint="chat", t_send=0.0)
        for i, data in enumerate(STREAMS[name]):
            if apply_event(record, data, 1.0 + i * 0.01, chunks):
                break
        records.append(dataclasses.asdict(record))
    assert records[0] == records[1]


def test_token_chunks_skip_the_decode_of_the_usual_chunk():
    chunks = TokenChunks()
    first, usual, last = _chat(b'"Hi"'), _chat(b'" there \\"x\\""'), _chat(b'"."', finish=b'"stop"')
    assert not chunks.match(first)  # nothing learned yet
    record = RequestRecord(endpoint="chat", t_send=0.0)
    apply_event(record, first, 1.0, chunks)
    assert chunks.match(usual) and not chunks.match(last) and not chunks.match(_chat(b'""'))
    assert not chunks.match(_chat(b'"a"', rid=b"other")) and not chunks.match(_chat(b'"a" , "b"'))


@pytest.mark.parametrize("name", list(STREAMS))
@pytest.mark.parametrize("framing", ["one event per piece", "cut anywhere", "CRLF", "bytearray pieces"])
def test_event_stream_gives_the_same_record_as_decoding_every_chunk(name, framing):
    """The client's per-piece path (the usual token event applied whole, anything else through the
    SSE decoder) against a plain decode of every chunk, however the body arrives."""
    expected = RequestRecord(endpoint="chat", t_send=0.0)
    for i, data in enumerate(STREAMS[name]):
        if apply_event(expected, data, 1.0 + i * 0.01):
            break
    newline = b"\r\n" if framing == "CRLF" else b"\n"
    events = [b"data: " + data + newline + newline for data in STREAMS[name]]
    pieces = [(e, 1.0 + i * 0.01) for i, e in enumerate(events)]
    if framing == "cut anywhere":  # each event in two pieces (at the same time: an event's time is its data's)
        pieces = [(part, t) for e, t in pieces for part in (e[:7], e[7:])]
    record = RequestRecord(endpoint="chat", t_send=0.0)
    stream = EventStream(record)
    for piece, t in pieces:
        if stream.feed(bytearray(piece) if framing == "bytearray pieces" else piece, t):
            break
    else:
        stream.flush(2.0)
    assert dataclasses.asdict(record) == dataclasses.asdict(expected)


def test_match_event_recognises_the_usual_token_event_whole():
    chunks = TokenChunks()
    record = RequestRecord(endpoint="chat", t_send=0.0)
    apply_event(record, _chat(b'"Hi"'), 1.0, chunks)

    def event(data: bytes) -> bytes:
        return b"data: " + data + b"\n\n"

    for content in (b'" there"', b'" \\"x\\""', b'"\\\\"', b'"\\u00e9"'):
        assert chunks.match_event(event(_chat(content))) and chunks.match_event(bytearray(event(_chat(content))))
    for other in (_chat(b'""'), _chat(b'"."', finish=b'"stop"'), _chat(b'"a" , "b"'), _chat(b'"a\\"')):
        assert not chunks.match_event(event(other))
    assert not chunks.match_event(event(_chat(b'"a"')) + event(_chat(b'"b"')))  # two events: decoded
    assert not chunks.match_event(_chat(b'"a"') + b"\n\n")  # not framed as an event
