"""The SSE decoder: events split anywhere, many per chunk, comments, CR/LF variants, flush."""

import random
import time

import pytest

from llm_locust.metrics.sse import EventTooLarge, SSEDecoder

STREAM = (
    b": keep-alive\n\n"
    b'data: {"a": 1}\n\n'
    b"event: ping\ndata: x\n\n"
    b"data: line1\ndata: line2\n\n"
    b"data:no-space\r\n\r\n"
    b"id: 7\nretry: 100\ndata: with id\n\n"
    b"data: [DONE]\n\n"
)
EXPECTED = [
    (b'{"a": 1}', None),
    (b"x", "ping"),
    (b"line1\nline2", None),
    (b"no-space", None),
    (b"with id", None),
    (b"[DONE]", None),
]


def decode(chunks: list[bytes]) -> list[tuple[bytes, str | None]]:
    decoder = SSEDecoder()
    events = []
    for i, chunk in enumerate(chunks):
        events += decoder.feed(chunk, float(i))
    events += decoder.flush(float(len(chunks)))
    return [(e.data, e.event) for e in events]


def test_whole_stream_in_one_chunk():
    assert decode([STREAM]) == EXPECTED


def test_every_split_point_gives_the_same_events():
    for cut in range(len(STREAM) + 1):
        assert decode([STREAM[:cut], STREAM[cut:]]) == EXPECTED, cut


@pytest.mark.parametrize("seed", range(20))
def test_random_splits_and_byte_at_a_time(seed):
    rng = random.Random(seed)
    chunks, i = [], 0
    while i < len(STREAM):
        n = rng.randint(1, 12)
        chunks.append(STREAM[i : i + n])
        i += n
    assert decode(chunks) == EXPECTED
    assert decode([bytes([b]) for b in STREAM]) == EXPECTED


def test_cr_only_line_endings_and_crlf_split_between_chunks():
    assert decode([b"data: a\r\r", b"data: b\r", b"\n\r\n"]) == [(b"a", None), (b"b", None)]


def test_event_time_is_arrival_of_its_data_line():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: x", 1.0) == []
    assert decoder.feed(b"\n", 2.0) == []  # the data line is complete at t=2
    (event,) = decoder.feed(b"\n", 3.0)
    assert (event.data, event.t) == (b"x", 2.0)


def test_flush_dispatches_an_unterminated_last_event_and_nothing_twice():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: tail", 1.0) == []
    assert [e.data for e in decoder.flush(2.0)] == [b"tail"]
    assert decoder.flush(3.0) == []


def test_comments_and_blank_lines_alone_make_no_event():
    assert decode([b": ping\n\n\n: another\n\n"]) == []


def test_every_split_point_gives_each_event_the_arrival_of_its_first_data_line():
    # where each event's first data line ends (its line terminator's first byte)
    ends = []
    for data_line in (
        b'data: {"a": 1}',
        b"data: x",
        b"data: line1",
        b"data:no-space",
        b"data: with id",
        b"data: [DONE]",
    ):
        ends.append(STREAM.index(data_line) + len(data_line))
    for cut in range(len(STREAM) + 1):
        decoder = SSEDecoder()
        events = decoder.feed(STREAM[:cut], 0.0) + decoder.feed(STREAM[cut:], 1.0) + decoder.flush(2.0)
        assert [e.t for e in events] == [0.0 if end < cut else 1.0 for end in ends], cut


def test_many_whole_events_in_one_chunk_mixed_with_other_fields():
    chunk = (
        b'data: {"n": 1}\n\ndata: {"n": 2}\n\nevent: e\ndata: 3\n\n: c\n\ndata: 4\ndata: 5\n\ndata: {"n": 6}\n\ndata: 7'
    )
    decoder = SSEDecoder()
    events = decoder.feed(chunk, 5.0)
    assert [(e.data, e.event, e.t) for e in events] == [
        (b'{"n": 1}', None, 5.0), (b'{"n": 2}', None, 5.0), (b"3", "e", 5.0), (b"4\n5", None, 5.0),
        (b'{"n": 6}', None, 5.0),
    ]  # fmt: skip
    assert [(e.data, e.t) for e in decoder.feed(b"\n\n", 6.0)] == [(b"7", 6.0)]


# -- the bound on a line and an event (--max-event-bytes) ------------------------------------------------------------
BOUND = 64


def feed_all(decoder: SSEDecoder, chunks: list[bytes]) -> list[bytes]:
    events = []
    for i, chunk in enumerate(chunks):
        events += decoder.feed(chunk, float(i))
    return [e.data for e in events + decoder.flush(float(len(chunks)))]


def test_a_line_up_to_the_bound_is_read_whole_at_every_split_point():
    payload = b"x" * (BOUND - len(b"data: "))
    stream = b"data: " + payload + b"\n\ndata: [DONE]\n\n"
    for cut in range(len(stream) + 1):
        for second in range(cut, len(stream) + 1, 7):
            chunks = [stream[:cut], stream[cut:second], stream[second:]]
            assert feed_all(SSEDecoder(BOUND), chunks) == [payload, b"[DONE]"], (cut, second)


@pytest.mark.parametrize("seed", range(10))
def test_a_line_over_the_bound_raises_once_the_bytes_kept_pass_it(seed):
    """Pieces of random sizes, the line never ended: the piece that takes the kept bytes over the bound raises."""
    rng = random.Random(seed)
    decoder, kept = SSEDecoder(BOUND), 0
    while True:
        piece = b"y" * rng.randint(1, 20)
        if kept + len(piece) > BOUND and kept:  # a line already started: this piece passes the bound
            with pytest.raises(EventTooLarge, match=r"a line over 64 bytes \(--max-event-bytes\)"):
                decoder.feed(piece, 0.0)
            return
        assert decoder.feed(piece, 0.0) == []
        kept += len(piece)


def test_an_event_of_many_lines_over_the_bound_raises():
    decoder = SSEDecoder(BOUND)
    with pytest.raises(EventTooLarge, match="an event over 64 bytes"):
        for _ in range(BOUND + 1):
            decoder.feed(b"data:\n", 0.0)  # empty data lines: each adds the line feed that joins them


def test_comment_lines_never_make_an_event_too_large():
    decoder = SSEDecoder(BOUND)
    for _ in range(100):
        assert decoder.feed(b": keep-alive " + b"z" * 40 + b"\n", 0.0) == []


def test_a_long_line_in_pieces_is_read_in_linear_time():
    """30 MB without a line ending, in 16 KiB reads, under a bound above it: the pieces are kept and joined once (the
    old decoder re-joined the whole line on every read: ~28 GB copied, tens of seconds)."""
    piece = b"a" * 16384
    decoder = SSEDecoder(64 * 1024 * 1024)
    started = time.perf_counter()
    decoder.feed(b"data: ", 0.0)
    for _ in range(30_000_000 // len(piece)):
        decoder.feed(piece, 0.0)
    (event,) = decoder.feed(b"\n\n", 1.0)
    elapsed_s = time.perf_counter() - started
    assert len(event.data) == 30_000_000 // len(piece) * len(piece)
    assert elapsed_s < 3.0, f"{elapsed_s:.1f} s for 30 MB"  # linear: ~0.05 s; a generous bound for a busy machine
