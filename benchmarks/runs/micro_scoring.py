"""CPU cost per token event of keeping and scoring an answer (what `client_capacity.py --scoring on` adds), in this
process's CPU time: a 128-event chat stream read by the chat API's own reader (`framing.SSE.reader`, as the transport
reads it, an event a piece, then the same body in 4 KB pieces), without and with its answer kept (`StreamText`: each
event's payload handed over by the reader, decoded after the stream), then scored against a regex and a
multiple-choice letter.

    .venv/bin/python benchmarks/runs/micro_scoring.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from llm_locust.apis import api
from llm_locust.metrics.record import RequestRecord
from llm_locust.metrics.scoring import Reference, score
from llm_locust.metrics.stream_text import StreamText

EVENTS = 128
REPEATS = 2000
REFERENCE = Reference(regex=r"[a-z]+", choices=("first", "second", "third", "fourth"), answer="B")


def chunk(i: int) -> bytes:
    """One chat chunk event carrying the word `word{i}`, as the simulator frames it."""
    body = {"id": "c", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": f" word{i}"}, "finish_reason": None}]}  # fmt: skip
    return b"data: " + orjson.dumps(body) + b"\n\n"


def per_event_us(pieces: list[bytes], kept: bool) -> float:
    """CPU µs per event to read `pieces` with the chat reader (and, when `kept`, keep, decode and score the
    answer)."""
    chat = api("chat")
    t0 = time.process_time()
    for _ in range(REPEATS):
        record = RequestRecord("chat", t_send=0.0)
        text = StreamText(chat.event_text, chat.answer_parts) if kept else None  # type: ignore[arg-type]
        reader = chat.framing.reader(record, chat.parser, None if text is None else text.keep)
        for piece in pieces:
            reader.feed(piece, 0.0)
        if text is not None:
            text.text()
            score(REFERENCE, text.answer()[0])
    return (time.process_time() - t0) / (REPEATS * EVENTS) * 1e6


def main() -> None:
    events = [*(chunk(i) for i in range(EVENTS)), b"data: [DONE]\n\n"]
    body = b"".join(events)
    coalesced = [body[i : i + 4096] for i in range(0, len(body), 4096)]
    for _ in range(2):
        for name, pieces in (("an event a piece", events), ("4 KB pieces", coalesced)):
            read, both = per_event_us(pieces, False), per_event_us(pieces, True)
            print(f"{name}: read {read:.2f} µs/event, read + kept + scored {both:.2f} (+{both - read:.2f})")
        content = " ".join(f"word{i}" for i in range(EVENTS))
        t0 = time.process_time()
        for _ in range(REPEATS):
            score(REFERENCE, content)
        print(f"scored alone: {(time.process_time() - t0) / REPEATS * 1e6:.1f} µs/answer")


if __name__ == "__main__":
    main()
