"""The end of every request: its finished record reported to Locust, once, the same way for both clients.

A transport (`transport.request.Transport`) sends a request and returns its `RequestRecord`; the caller — the
scenario client (`runtime.llm_client`), which every user's request goes through — lets the workload hear of the
answer and then calls `report`: Locust's request event, fired as Locust's own `ResponseContextManager` fires it
(locust/contrib/fasthttp.py), with the E2E latency as its response time, the output tokens as its length, the
failure in its exception and the record in its context under `RECORD_KEY`, where the plugin's request listener
(`users_part.UsersPart`) takes it into the metrics.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from llm_locust.apis import api
from llm_locust.load.clock import RunClock
from llm_locust.metrics.record import ErrorKind, RequestRecord

RECORD_KEY = "llm_record"
"""Key of the `RequestRecord` in the context of the request event."""


class RequestFailure(Exception):
    """The exception Locust shows for a failed request: "<kind>: <message>"."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


def report(events: Any, name: str, record: RequestRecord, context: Mapping[str, Any], clock: RunClock) -> None:
    """Fire Locust's request event for the finished `record` under the stats row `name` ("POST"): E2E latency and
    output tokens (`report_values`), its failure as a `RequestFailure` (none when it succeeded or was cancelled), the
    user's `context` with the record under `RECORD_KEY`; `start_time`: the epoch second it was sent, on the run's
    `clock` (the master's)."""
    response_time_ms, length = report_values(record)
    failed = not (record.ok or record.cancelled)
    events.request.fire(
        request_type="POST",
        name=name,
        response_time=response_time_ms,
        response_length=length,
        exception=RequestFailure(record.error_kind, record.error_message) if failed else None,  # type: ignore[arg-type]
        context={**context, RECORD_KEY: record},
        response=None,
        url=None,
        start_time=clock.now_s() - (time.perf_counter() - record.t_send),
    )


def report_values(record: RequestRecord) -> tuple[float, int]:
    """What Locust's row shows for a finished request: (E2E latency in ms, output tokens — for an API that counts
    inputs (embeddings), prompt tokens); for a failed one (time to its end, 0), for a cancelled one (time to its end,
    the tokens it got)."""
    t_end = record.t_last if record.ok else record.t_done
    if not (record.ok or record.cancelled):
        return (t_end - record.t_send) * 1000, 0
    length = record.output_tokens if api(record.endpoint).counts_outputs else (record.prompt_tokens or 0)
    return (t_end - record.t_send) * 1000, length
