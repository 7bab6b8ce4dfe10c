"""A stream's kept text as the transport keeps it: the API's own reader (`Api.framing.reader`) fed the body's pieces,
each event's payload handed to a `StreamText` (the text and its split, as `transport.client` decodes them)."""

from __future__ import annotations

from collections.abc import Iterable

from llm_locust.apis import api
from llm_locust.metrics.record import RequestRecord
from llm_locust.metrics.stream_text import StreamText


def kept_stream(endpoint: str, pieces: Iterable[bytes], answer: bool = True) -> tuple[StreamText, RequestRecord]:
    """The `StreamText` (with the API's answer split when `answer`) and the record of `endpoint`'s stream read from
    `pieces` in order, each arriving 1 ms after the one before (the reader stops where the transport would)."""
    spec = api(endpoint)
    kept = StreamText(spec.event_text, spec.answer_parts if answer else None)  # type: ignore[arg-type]
    record = RequestRecord(endpoint, t_send=0.0)
    reader = spec.framing.reader(record, spec.parser, kept.keep)
    pieces = list(pieces)
    for i, piece in enumerate(pieces):
        if reader.feed(piece, 0.001 * (i + 1)):
            break
    else:
        reader.flush(0.001 * (len(pieces) + 1))
    return kept, record
