"""The simulator's fault picker, where a fault lands in a stream, and the `--fault` option (pure parts, no sockets;
the faults on the wire are in tests/integration/test_faults.py and test_fault_rate.py)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections import Counter

import orjson
import pytest

from llm_locust.sim.apis import encoder_of, parse_completion
from llm_locust.sim.apis.completions import MALFORMED_EVENT
from llm_locust.sim.faults import KINDS, MID_STREAM, FaultPicker, FaultSpecError, parse_fault
from llm_locust.sim.stream import FaultGeneration, Generation
from llm_locust.sim.trace import TraceRecord


def test_parse_fault():
    assert parse_fault("http_429=0.05") == ("http_429", 0.05)
    assert parse_fault(" cut =1") == ("cut", 1.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [("bogus=0.1", "unknown fault kind 'bogus'"), ("cut", "PROBABILITY"), ("cut=x", "PROBABILITY"),
     ("cut=1.5", "in [0, 1]"), ("cut=-0.1", "in [0, 1]"), ("cut=nan", "in [0, 1]")],
)  # fmt: skip
def test_parse_fault_rejects(text, message):
    with pytest.raises(FaultSpecError, match=re.escape(message)):
        parse_fault(text)


def test_probabilities_must_not_exceed_one():
    with pytest.raises(FaultSpecError, match=r"add up to 1\.2"):
        FaultPicker([("cut", 0.7), ("reset", 0.5)], seed=0)


def test_picker_rates_and_seed():
    picker = FaultPicker([("http_429", 0.1), ("cut", 0.2)], seed=3)
    draws = [picker.pick() for _ in range(20_000)]
    counts = Counter(draws)
    assert set(counts) == {None, "http_429", "cut"}
    assert abs(counts["http_429"] / 20_000 - 0.1) < 0.01 and abs(counts["cut"] / 20_000 - 0.2) < 0.015
    again = FaultPicker([("http_429", 0.1), ("cut", 0.2)], seed=3)
    assert [again.pick() for _ in range(20_000)] == draws  # same seed, same faults, same order
    assert not FaultPicker([], seed=0).active and FaultPicker([], seed=0).pick() is None
    assert FaultPicker([(k, 1 / len(KINDS)) for k in KINDS], seed=0).active


def test_bad_fault_option_is_a_one_line_usage_error():
    command = [
        sys.executable,
        "-m",
        "llm_locust.cli",
        "sim",
        "--port",
        "0",
        "--fault",
        "cut=0.7",
        "--fault",
        "reset=0.5",
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "llm-locust sim: error: --fault probabilities add up to 1.2; their sum must be at most 1"
    ]


def test_rate_one_draws_the_fault_for_every_request_and_a_rate_p_for_p_of_them():
    always = FaultPicker([("bad_json", 1.0)], seed=11)
    assert all(always.pick() == "bad_json" for _ in range(10_000))
    for seed in (0, 1, 2):
        picker = FaultPicker([("bad_json", 0.25)], seed=seed)
        draws = [picker.pick() for _ in range(20_000)]
        assert abs(draws.count("bad_json") / 20_000 - 0.25) < 0.015
        again = FaultPicker([("bad_json", 0.25)], seed=seed)
        assert [again.pick() for _ in range(20_000)] == draws  # request n gets the same fault, whenever it comes


class _Transport:
    """What a generation writes, as one byte string (the `asyncio.Transport` calls a fault makes)."""

    def __init__(self) -> None:
        self.data = b""
        self.aborted = False

    def write(self, data: bytes) -> None:
        self.data += data

    def get_extra_info(self, name: str) -> None:
        return None

    def abort(self) -> None:
        self.aborted = True


TOKENS = 16
GROUPINGS = [
    [1] * TOKENS,
    [TOKENS],
    [2] * (TOKENS // 2),
    [7, 9],
    [1, TOKENS - 1],
    [TOKENS // 2, TOKENS // 2],
    [8, 1, 7],
]
"""How a timing model may hand a response's tokens over: one per wake, all in one late wake, pairs, ..."""


STALL_S = 0.01


def _faulted_stream(
    kind: str, grouping: list[int], tokens: int = TOKENS
) -> tuple[_Transport, TraceRecord, list[Generation]]:
    """A streamed chat response of `tokens` tokens suffering `kind`, its tokens produced in groups of `grouping` (as a
    timing driver hands them over, which stops once the generation is released); returns what was written, the
    trace record and the generations released (call in a running event loop: a stall's resume is timed by it)."""
    body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True})
    spec = parse_completion(body, "chat", ("m",), tokens)
    record = TraceRecord("chatcmpl-1", "chat", True, 0.0, spec.prompt_tokens)
    transport, released, done = _Transport(), [], []
    generation = FaultGeneration(
        transport, spec, record, encoder_of(spec)(spec, record.id, 0, "m", 0),
        fault=kind, release=released.append, stall_s=STALL_S, huge_bytes=100, chunked=True, keep_alive=True,
        on_done=done.append,
    )  # fmt: skip
    generation.start()
    for count in grouping:
        if released:
            break
        generation.seq.emitted += count
        generation.emit(count)
    return transport, record, released


def _token_events(data: bytes) -> list[bytes]:
    """The start of each token event (non-empty text) in a written stream."""
    return re.findall(rb'"content":"[^"]', data)


@pytest.mark.parametrize("grouping", GROUPINGS, ids=lambda g: "+".join(map(str, g)))
@pytest.mark.parametrize("kind", MID_STREAM)
def test_a_mid_stream_fault_lands_on_its_token_however_the_tokens_are_grouped(kind, grouping):
    """The fault takes the place of token TOKENS // 2 whether the tokens come one per wake or all at once: a late
    wake (or concurrent requests finishing at the same instant) never skips it."""
    at = TOKENS // 2

    async def run() -> tuple[bytes, _Transport, TraceRecord, list[Generation]]:
        transport, record, released = _faulted_stream(kind, grouping)
        written = transport.data
        await asyncio.sleep(STALL_S * 5)  # a stall's silence ends
        return written, transport, record, released

    written, transport, record, released = asyncio.run(run())
    assert record.fault == kind
    events = _token_events(written)
    if kind in ("bad_json", "huge_chunk"):  # the stream goes on to its end after the faulted event
        assert len(events) == TOKENS and MALFORMED_EVENT.count(b'"content":"') == 1
        assert events[at - 1] == (b'"content":"t' if kind == "bad_json" else b'"content":"x')  # "trunc..." / "xxx..."
        assert written.endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n") and record.finish_reason == "stop"
        assert record.completion_tokens == TOKENS and not released
        return
    # the stream stops (or pauses) where the faulted token was due: the tokens before it were written
    assert len(events) == at - 1 and len(released) == 1
    assert transport.aborted == (kind == "reset")
    assert (b'"error"' in written) == (kind == "stream_error")
    if kind == "stall":  # then the rest, faulted token included, and the stream's end
        assert len(_token_events(transport.data)) == TOKENS and record.finish_reason == "stop"
    else:
        assert record.finish_reason is None


@pytest.mark.parametrize("kind", MID_STREAM)
def test_a_mid_stream_fault_strikes_a_one_token_stream_on_its_only_token(kind):
    async def run() -> tuple[_Transport, TraceRecord, list[Generation]]:
        transport, record, released = _faulted_stream(kind, [1], tokens=1)
        await asyncio.sleep(STALL_S * 5)  # a stall's silence ends
        return transport, record, released

    transport, record, released = asyncio.run(run())
    assert record.fault == kind
    events = _token_events(transport.data)
    if kind in ("bad_json", "huge_chunk", "stall"):  # the faulted event (or, after the stall, the token), the end
        assert len(events) == 1 and transport.data.endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n")
        assert record.finish_reason == "stop" and len(released) == (kind == "stall")
    else:  # no token at all
        assert events == [] and record.finish_reason is None and len(released) == 1
