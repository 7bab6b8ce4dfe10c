"""The Python de-framer of chunked bodies (llm_locust.transport.chunked) hands the HTTP parser a consistent
state: body and completion are the same as the parser's own, for any split of the bytes."""

from __future__ import annotations

from itertools import pairwise

from geventhttpclient._parser import HTTPParseError
from geventhttpclient.response import HTTPResponse
from harness.sse_server import HEADERS as HEAD
from harness.sse_server import chunk
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_locust.transport.chunked import ChunkedBody


def parser_alone(body: bytes, splits: list[int]) -> tuple[bytes, bool, bool]:
    """(body, message complete, parse error) when llhttp reads everything."""
    response = HTTPResponse()
    response.feed(HEAD)
    failed = False
    try:
        for piece in _pieces(body, splits):
            response.feed(piece)
    except HTTPParseError:
        failed = True
    return bytes(response._body_buffer), response.message_complete, failed


def with_chunked_body(body: bytes, splits: list[int], handover: int) -> tuple[bytes, bool, bool]:
    """The same with the pump's arrangement: llhttp reads the first `handover` bytes with the
    headers; `ChunkedBody` takes over if the parser then stands at a chunk boundary."""
    response = HTTPResponse()
    failed = False
    try:
        response.feed(HEAD + body[:handover])
    except HTTPParseError:
        return bytes(response._body_buffer), response.message_complete, True
    out = bytearray(response._body_buffer)
    del response._body_buffer[:]
    response._on_body = out.extend
    chunks = ChunkedBody() if response.get_remaining_content_length() == 0 else None
    try:
        for piece in _pieces(body[handover:], splits):
            if chunks is not None:
                rest = chunks.feed(piece, out.extend)
                if rest is None:
                    continue
                chunks = None
                piece = rest
            response.feed(piece)
    except HTTPParseError:
        failed = True
    return bytes(out), response.message_complete, failed


def _pieces(data: bytes, splits: list[int]) -> list[bytes]:
    cuts = sorted({s % (len(data) + 1) for s in splits} | {0, len(data)})
    return [data[a:b] for a, b in pairwise(cuts) if b > a]


EVENTS = [b'data: {"choices":[{"delta":{"content":"tok%d"}}]}\n\n' % i for i in range(5)]
BODY = b"".join(chunk(e) for e in EVENTS) + b"0\r\n\r\n"


def test_every_split_and_handover_point_gives_the_parsers_body_and_completion():
    expected = parser_alone(BODY, [])
    assert expected == (b"".join(EVENTS), True, False)
    for handover in range(len(BODY) + 1):
        for cut in range(len(BODY) - handover + 1):
            assert with_chunked_body(BODY, [cut], handover) == expected, (handover, cut)


def test_extensions_trailers_and_a_truncated_body():
    body = chunk(b"data: a\n\n", b";name=value") + b"0\r\nX-Trailer: 1\r\n\r\n"
    assert with_chunked_body(body, [3, 17], 0) == parser_alone(body, []) == (b"data: a\n\n", True, False)
    truncated = BODY[:40]
    assert with_chunked_body(truncated, [7], 0) == (parser_alone(truncated, [])[0], False, False)


def test_the_data_chunks_are_taken_without_the_parser():
    pieces: list[bytes] = []
    chunks = ChunkedBody()
    assert chunks.feed(b"".join(chunk(e) for e in EVENTS[:2]), pieces.append) is None
    assert pieces == EVENTS[:2]
    assert chunks.feed(b"0\r\n\r\n", pieces.append) == b"0\r\n\r\n"  # the last chunk: the parser's


@settings(max_examples=300, deadline=None)
@given(
    payloads=st.lists(st.binary(min_size=1, max_size=40), max_size=6),
    garbage=st.binary(max_size=12),
    splits=st.lists(st.integers(min_value=0, max_value=400), max_size=5),
    handover=st.integers(min_value=0, max_value=400),
    extension=st.sampled_from([b"", b";x", b";x=1", b" ;x"]),
)
def test_any_body_and_garbage_read_in_any_pieces_matches_the_parser(payloads, garbage, splits, handover, extension):
    body = b"".join(chunk(p, extension) for p in payloads) + garbage
    handover %= len(body) + 1
    assert with_chunked_body(body, splits, handover) == parser_alone(body, splits)
