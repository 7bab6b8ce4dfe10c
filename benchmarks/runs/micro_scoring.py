"""CPU cost per token event of keeping and scoring an answer (what `client_capacity.py --scoring on` adds), in this
process's CPU time: a 128-event chat stream's body kept (`StreamText`), decoded to its answer after the stream, and
scored against a regex and a multiple-choice letter.

    .venv/bin/python benchmarks/runs/micro_scoring.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from llm_locust.apis import api
from llm_locust.metrics.scoring import Reference, score
from llm_locust.metrics.stream_text import StreamText

EVENTS = 128
REPEATS = 2000
REFERENCE = Reference(regex=r"[a-z]+", choices=("first", "second", "third", "fourth"), answer="B")


def chunk(i: int) -> bytes:
    """One chat chunk event carrying the word `word{i}`."""
    body = {"id": "c", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": f" word{i}"}, "finish_reason": None}]}  # fmt: skip
    return b"data: " + orjson.dumps(body) + b"\n\n"


def main() -> None:
    chat = api("chat")
    events = [*(chunk(i) for i in range(EVENTS)), b"data: [DONE]\n\n"]
    for _ in range(2):
        t0 = time.process_time()
        for _ in range(REPEATS):
            kept = StreamText(chat.event_text, chat.answer_parts)
            for event in events:
                kept.add(event)
            kept.text()
            score(REFERENCE, kept.answer()[0])
        per_event_us = (time.process_time() - t0) / (REPEATS * EVENTS) * 1e6
        content = " ".join(f"word{i}" for i in range(EVENTS))
        t0 = time.process_time()
        for _ in range(REPEATS):
            score(REFERENCE, content)
        per_answer_us = (time.process_time() - t0) / REPEATS * 1e6
        print(f"kept, decoded and scored: {per_event_us:.2f} µs/event; scored alone: {per_answer_us:.1f} µs/answer")


if __name__ == "__main__":
    main()
