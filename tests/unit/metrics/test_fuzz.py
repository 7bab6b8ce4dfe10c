"""Property-based fuzzing (hypothesis) of what parses untrusted bytes: the SSE decoder and the chunk protocol."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from llm_locust.metrics.protocol import apply_event, finish
from llm_locust.metrics.record import ErrorKind, RequestRecord
from llm_locust.metrics.sse import SSEDecoder
from llm_locust.metrics.window import WindowMetrics

LINE_ENDINGS = st.sampled_from([b"\n", b"\r\n", b"\r"])
FIELD_TEXT = st.binary(max_size=40).filter(lambda b: b"\n" not in b and b"\r" not in b)
EVENT = st.tuples(
    st.lists(FIELD_TEXT, min_size=1, max_size=3),  # data lines
    st.one_of(st.none(), st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=10)),
    st.booleans(),  # a comment line (keep-alive) before the event
)


def encode(events: list, endings: list[bytes]) -> bytes:
    """A valid SSE stream of `events`, line endings drawn in turn from `endings`."""
    out = bytearray()
    i = 0

    def line(text: bytes) -> None:
        nonlocal i
        ending = endings[i % len(endings)]
        if not text and out.endswith(b"\r") and ending.startswith(b"\n"):
            ending = b"\r"  # CR then LF would be one CRLF line ending, not two
        out.extend(text + ending)
        i += 1

    for data_lines, event_type, comment in events:
        if comment:
            line(b": keep-alive")
        if event_type is not None:
            line(b"event: " + event_type.encode())
        for data in data_lines:
            line(b"data: " + data)
        line(b"")
    return bytes(out)


def decode(chunks: list[bytes]) -> list[tuple[bytes, str | None]]:
    decoder = SSEDecoder()
    events = []
    for t, chunk in enumerate(chunks):
        events.extend(decoder.feed(chunk, float(t)))
    events.extend(decoder.flush(float(len(chunks))))
    return [(e.data, e.event) for e in events]


@settings(max_examples=300, deadline=None)
@given(events=st.lists(EVENT, max_size=8), endings=st.lists(LINE_ENDINGS, min_size=1, max_size=4), data=st.data())
def test_any_split_of_a_valid_stream_gives_the_same_events(events, endings, data):
    stream = encode(events, endings)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    expected = [(b"\n".join(lines), event_type) for lines, event_type, _ in events]
    assert decode([stream]) == expected
    assert decode([c for c in chunks if c]) == expected
    assert decode([stream[i : i + 1] for i in range(len(stream))]) == expected  # byte by byte


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=10))
def test_random_bytes_never_raise(chunks):
    for event in decode(chunks):
        assert isinstance(event[0], bytes)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
KEYS = st.sampled_from(["choices", "delta", "content", "text", "usage", "error", "finish_reason", "reasoning",
                        "tool_calls", "completion_tokens", "prompt_tokens", "reasoning_content", "0"])  # fmt: skip
CHUNKISH = st.recursive(
    JSON, lambda children: st.lists(children, max_size=3) | st.dictionaries(KEYS, children, max_size=5), max_leaves=25
)
"""JSON shaped like stream chunks: the protocol's own keys holding values of any type."""


def check_record(record: RequestRecord) -> None:
    """A record built from any payloads finishes and enters the metrics without an exception."""
    finish(record, 1e9)
    assert record.ok or isinstance(record.error_kind, ErrorKind)
    assert isinstance(record.output_tokens, int)
    WindowMetrics().add(record)


@settings(max_examples=300, deadline=None)
@given(st.lists(CHUNKISH, max_size=6))
def test_apply_event_never_raises_on_any_json(payloads):
    record = RequestRecord(endpoint="chat", t_send=0.0)
    for t, payload in enumerate(payloads, start=1):
        if apply_event(record, json.dumps(payload).encode(), float(t)):
            break
    check_record(record)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=80), max_size=6))
def test_apply_event_never_raises_on_any_bytes(payloads):
    record = RequestRecord(endpoint="chat", t_send=0.0)
    for t, payload in enumerate(payloads, start=1):
        if apply_event(record, payload, float(t)):
            break
    check_record(record)
