"""Requests the run's end cut short: in flight when the test stopped its users, never finished — neither successful,
failed nor cancelled, so in no other count — and how far each got.

How far they got says why a run in which no request finished finished none (`results.outcome.no_finish`): no
response headers (a server that accepts connections and never answers), headers but no token (a queue, a model still
loading), or tokens but no end of stream (`--max-tokens` longer than the run). Every process running users counts its
own (`unfinished_of`, from the records in flight when the test began to stop); a worker ships its count to the master
(`as_dict` / `from_dict`), which adds them up (`merge`).

Pure: imports neither Locust nor gevent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from llm_locust.metrics.record import RequestRecord


@dataclass(frozen=True, slots=True)
class Unfinished:
    """Requests cut by the run's end, by the furthest point each reached, and the longest any of them had been in
    flight when the end came (seconds since it was sent, to the ms): `no_headers` — waiting for the response headers;
    `no_token` — headers in (an HTTP status), no generated token yet; `streaming` — tokens arriving, the stream not
    finished. (With `--client openai-sdk` the headers are not seen: a request without a token is `no_headers`.)"""

    no_headers: int = 0
    no_headers_longest_s: float = 0.0
    no_token: int = 0
    no_token_longest_s: float = 0.0
    streaming: int = 0
    streaming_longest_s: float = 0.0

    @property
    def requests(self) -> int:
        """All the requests cut."""
        return self.no_headers + self.no_token + self.streaming

    @property
    def longest_s(self) -> float:
        """How long the longest of them had been in flight, seconds (0 without any)."""
        return max(self.no_headers_longest_s, self.no_token_longest_s, self.streaming_longest_s)

    def merge(self, other: Unfinished) -> Unfinished:
        """These and `other`'s (another process's) together: counts added, the longest times the larger."""
        return Unfinished(
            **{
                f.name: (max if f.name.endswith("_s") else sum)((getattr(self, f.name), getattr(other, f.name)))
                for f in fields(Unfinished)
            }
        )

    def as_dict(self) -> dict[str, Any]:
        """summary.json's `unfinished` (and the worker → master wire): `requests`, then each stage's count and
        longest time (s)."""
        return {"requests": self.requests, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Unfinished:
        """Read back an `as_dict` document (keys it does not know are left out)."""
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


def unfinished_of(records: Iterable[RequestRecord], t_end_s: float) -> Unfinished:
    """The requests among `records` (those in flight when the test began to stop, at perf_counter `t_end_s`) that
    were sent and never finished: no stream end, no failure, no cancellation recorded (`t_done` is set for each of
    those, and a request stopped with its user gets none) — by how far each got, with its time in flight at `t_end_s`
    (s, to the ms: every view of the count shows the same figures).

    An open loop's record whose `t_send` is still before its `t_sched` was never sent: it waited for its due time
    when the stop came (`t_send` is taken as the request leaves, once due), and no request leaves once the stop began.
    """
    counts = {"no_headers": 0, "no_token": 0, "streaming": 0}
    longest_s = dict.fromkeys(counts, 0.0)
    for record in records:
        if record.t_done is not None or (record.t_sched is not None and record.t_send < record.t_sched):
            continue
        if record.t_first is not None:
            stage = "streaming"
        elif record.t_headers is not None or record.status_code:
            stage = "no_token"
        else:
            stage = "no_headers"
        counts[stage] += 1
        longest_s[stage] = max(longest_s[stage], t_end_s - record.t_send)
    return Unfinished(**counts, **{f"{stage}_longest_s": round(s, 3) for stage, s in longest_s.items()})
