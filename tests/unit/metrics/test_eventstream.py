"""The AWS event-stream decoder (`metrics.eventstream`) and Bedrock's ConverseStream events (`apis.converse`):
messages split at every byte, many per chunk, checksums and lengths checked, each message timed by the chunk that
completed it; the simulator's frames are valid for botocore's own parser too."""

import struct
import time
from zlib import crc32

import pytest
from botocore.eventstream import EventStreamBuffer
from harness.kept_text import kept_stream

from llm_locust.apis.converse import apply_message
from llm_locust.metrics.eventstream import PRELUDE_BYTES, EventStreamDecoder, EventStreamError
from llm_locust.metrics.framing import EVENTSTREAM
from llm_locust.metrics.protocol import finish
from llm_locust.metrics.record import ErrorKind, RequestRecord
from llm_locust.metrics.sse import EventTooLarge
from llm_locust.sim.apis.converse import event, exception, message

STREAM = [
    event("messageStart", {"role": "assistant"}),
    event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hello"}, "p": "abc"}),
    event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": " wörld"}}),
    event("contentBlockStop", {"contentBlockIndex": 0}),
    event("messageStop", {"stopReason": "end_turn"}),
    event("metadata", {"usage": {"inputTokens": 7, "outputTokens": 2, "totalTokens": 9}, "metrics": {"latencyMs": 5}}),
]
BODY = b"".join(STREAM)
KINDS = ["messageStart", "contentBlockDelta", "contentBlockDelta", "contentBlockStop", "messageStop", "metadata"]


def decode(chunks: list[bytes]) -> list[tuple[str | None, bytes, float]]:
    decoder = EventStreamDecoder()
    messages = []
    for i, chunk in enumerate(chunks):
        messages += decoder.feed(chunk, float(i))
    assert decoder.idle
    return [(m.event, m.data, m.t) for m in messages]


def test_the_simulators_messages_are_what_botocore_reads():
    buffer = EventStreamBuffer()
    buffer.add_data(BODY)
    parsed = list(buffer)
    assert [m.headers[":event-type"] for m in parsed] == KINDS
    assert [m.headers[":message-type"] for m in parsed] == ["event"] * len(KINDS)
    assert [m.payload for m in parsed] == [m.data for m in EventStreamDecoder().feed(BODY, 0.0)]


def test_whole_stream_in_one_chunk():
    decoded = decode([BODY])
    assert [kind for kind, _, _ in decoded] == KINDS
    assert b'"text":"Hello"' in decoded[1][1]


def test_every_split_point_gives_the_same_messages_timed_by_the_chunk_that_completed_them():
    ends = [sum(map(len, STREAM[: i + 1])) for i in range(len(STREAM))]
    whole = [(kind, data) for kind, data, _ in decode([BODY])]
    for cut in range(len(BODY) + 1):
        decoded = decode([BODY[:cut], BODY[cut:]])
        assert [(kind, data) for kind, data, _ in decoded] == whole, cut
        assert [t for _, _, t in decoded] == [0.0 if end <= cut else 1.0 for end in ends], cut


def test_byte_at_a_time():
    decoded = decode([bytes([b]) for b in BODY])
    assert [kind for kind, _, _ in decoded] == KINDS
    assert [t for _, _, t in decoded] == [float(sum(map(len, STREAM[: i + 1])) - 1) for i in range(len(STREAM))]


@pytest.mark.parametrize(
    ("position", "problem"),
    [(9, "prelude checksum"), (12, "message checksum"), (-20, "message checksum"), (-1, "message checksum")],
)
def test_a_flipped_byte_is_a_checksum_error(position, problem):
    frame = bytearray(STREAM[1])
    frame[position] ^= 0x01
    with pytest.raises(EventStreamError, match=problem):
        EventStreamDecoder().feed(bytes(frame), 0.0)


def test_impossible_lengths_are_refused():
    prelude = struct.pack(">II", 8, 0)
    with pytest.raises(EventStreamError, match="length 8 out of range"):
        EventStreamDecoder().feed(prelude + struct.pack(">I", crc32(prelude)), 0.0)
    prelude = struct.pack(">II", 20, 10)
    with pytest.raises(EventStreamError, match="headers length 10"):
        EventStreamDecoder().feed(prelude + struct.pack(">I", crc32(prelude)), 0.0)


def test_every_header_type():
    headers = (
        b"\x01a\x00"  # true
        + b"\x01b\x01"  # false
        + b"\x01c\x02\xff"  # byte -1
        + b"\x01d\x03\x01\x00"  # short 256
        + b"\x01e\x04\x00\x00\x01\x00"  # integer 256
        + b"\x01f\x05" + struct.pack(">q", -5)  # long
        + b"\x01g\x06\x00\x02\x00\x01"  # byte array
        + b"\x01h\x07\x00\x02hi"  # string
        + b"\x01i\x08" + struct.pack(">q", 1700000000000)  # timestamp, ms
        + b"\x01j\x09" + bytes(range(16))  # uuid
    )  # fmt: skip
    prelude = struct.pack(">II", 16 + len(headers) + 2, len(headers))
    prelude += struct.pack(">I", crc32(prelude))
    raw = prelude + headers + b"{}"
    (decoded,) = EventStreamDecoder().feed(raw + struct.pack(">I", crc32(raw)), 3.0)
    assert decoded.headers == {"a": True, "b": False, "c": -1, "d": 256, "e": 256, "f": -5, "g": b"\x00\x01",
                               "h": "hi", "i": 1700000000000, "j": bytes(range(16))}  # fmt: skip
    assert (decoded.data, decoded.event, decoded.t, decoded.exception) == (b"{}", None, 3.0, False)


def test_an_unknown_header_type_is_refused():
    headers = b"\x01a\x0c"
    prelude = struct.pack(">II", 16 + len(headers), len(headers))
    raw = prelude + struct.pack(">I", crc32(prelude)) + headers
    with pytest.raises(EventStreamError, match="unknown type 12"):
        EventStreamDecoder().feed(raw + struct.pack(">I", crc32(raw)), 0.0)


def feed(record: RequestRecord, body: bytes, cut: int = 0) -> None:
    reader = EVENTSTREAM.reader(record, apply_message)
    times = iter(range(1, 1000))
    for piece in (body[:cut], body[cut:]) if cut else [body[i : i + 1] for i in range(len(body))]:
        if reader.feed(piece, float(next(times))):
            break
    reader.flush(999.0)
    finish(record, 1000.0)


def test_a_converse_stream_fills_the_record():
    record = RequestRecord(endpoint="converse", t_send=0.0)
    feed(record, BODY, cut=len(STREAM[0]) + len(STREAM[1]))
    assert record.ok, record.error_message
    assert (record.t_first, record.t_first_content, record.t_last) == (1.0, 1.0, 2.0)
    assert list(record.itl_us) == [1_000_000]
    assert (record.events, record.prompt_tokens, record.usage_completion_tokens) == (2, 7, 2)
    assert (record.finish_reason, record.saw_done) == ("end_turn", True)


def test_reasoning_and_tool_use_deltas():
    body = b"".join([
        event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "hmm"}}}),
        event("contentBlockStart", {"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "t1", "name": "f"}}}),
        event("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"toolUse": {"input": '{"a":'}}}),
        event("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"toolUse": {"input": " 1}"}}}),
        event("messageStop", {"stopReason": "tool_use"}),
    ])  # fmt: skip
    record = RequestRecord(endpoint="converse", t_send=0.0)
    feed(record, body)
    assert record.ok, record.error_message
    assert record.events == 3 and record.t_first < record.t_first_content
    assert [(call.id, call.name, call.arguments) for call in record.tool_calls] == [("t1", "f", '{"a": 1}')]
    assert record.finish_reason == "tool_use"


def test_an_exception_message_fails_the_request_with_its_reason():
    body = STREAM[0] + STREAM[1] + exception("throttlingException", "Too many tokens, please wait.")
    record = RequestRecord(endpoint="converse", t_send=0.0)
    feed(record, body)
    assert record.error_kind == ErrorKind.STREAM_ERROR
    assert record.error_message == "exception throttlingException: Too many tokens, please wait."


def test_a_corrupt_message_fails_the_request_as_a_bad_stream():
    corrupt = bytearray(BODY)
    corrupt[len(STREAM[0]) + 20] ^= 0xFF
    record = RequestRecord(endpoint="converse", t_send=0.0)
    feed(record, bytes(corrupt), cut=7)
    assert record.error_kind == ErrorKind.BAD_STREAM
    assert "checksum" in (record.error_message or "")


def test_a_stream_cut_before_its_end_is_incomplete():
    record = RequestRecord(endpoint="converse", t_send=0.0)
    feed(record, b"".join(STREAM[:3]) + STREAM[3][:10], cut=5)
    assert record.error_kind == ErrorKind.INCOMPLETE


def test_the_kept_text_of_a_converse_stream():
    kept, record = kept_stream("converse", [BODY[i : i + 5] for i in range(0, len(BODY), 5)])
    assert record.ok and kept.text() == "Hello wörld"
    assert kept.answer() == ("Hello wörld", "")
    broken, record = kept_stream("converse", [message({":event-type": "x"}, b"{}")[:-1] + b"\x00"], answer=False)
    assert record.error_kind == ErrorKind.BAD_STREAM and broken.text() == ""


# -- the bound on a message (--max-event-bytes) ----------------------------------------------------------------------
def test_a_message_up_to_the_bound_is_read_at_every_split_point():
    big = event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "x" * 300}})
    body = big + STREAM[-1]
    for cut in range(len(body) + 1):
        decoder = EventStreamDecoder(len(big))
        decoded = decoder.feed(body[:cut], 0.0) + decoder.feed(body[cut:], 1.0)
        assert [m.event for m in decoded] == ["contentBlockDelta", "metadata"] and decoder.idle, cut


def test_a_message_over_the_bound_raises_as_soon_as_its_prelude_is_in():
    big = event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "x" * 300}})
    for cut in range(PRELUDE_BYTES, len(big)):  # only the prelude (and some) of it arrived
        with pytest.raises(EventTooLarge, match=f"an event-stream message of {len(big)} bytes over 100 bytes"):
            EventStreamDecoder(100).feed(big[:cut], 0.0)


def test_a_long_message_in_pieces_is_read_in_linear_time():
    """A 15 MB message in 16 KiB reads: kept as pieces and joined once (the old decoder re-joined them on every read,
    ~7 GB copied)."""
    big = message({":event-type": "chunk", ":message-type": "event"}, b"p" * 15_000_000)
    decoder = EventStreamDecoder(16 * 1024 * 1024)
    started = time.perf_counter()
    messages = [m for start in range(0, len(big), 16384) for m in decoder.feed(big[start : start + 16384], 0.0)]
    elapsed_s = time.perf_counter() - started
    assert [len(m.data) for m in messages] == [15_000_000]
    assert elapsed_s < 3.0, f"{elapsed_s:.1f} s for 15 MB"  # linear: ~0.05 s; a generous bound for a busy machine
