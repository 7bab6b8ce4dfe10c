"""The client's error budget: how much the load generator itself can have added to TTFT, ITL and E2E, at p50 and p99.

Every latency is a difference of two readings of one process's clock (`t_send`, the arrival times of tokens), so the
clock offsets between workers add nothing to it (they bound only the times of requests.jsonl compared across
processes: summary.json `clocks`). What the client can add, per request (docs/metrics.md "The client's error budget"):

- **send side** (TTFT, E2E): `t_send` is read before the request is handed over; the server cannot have had it
  before the request's last byte reached the kernel (`t_uploaded`), so the client added at most the upload time
  (`upload_ms`), never less than nothing;
- **read side, with kernel receive times** (the fast client on Linux): a token's time is the kernel's receive time
  of the read that carried it, exact however late the read came — unless the read also carried a later segment of
  the stream (the client came too late to read the token before the next arrived): the token then has the later
  one's time. Two token events read together leave a gap of exactly 0 between them, so the ITL gaps at 0
  (`zero_gaps`) count every such merge (and the server's own events written together, which cost nothing): at most
  one first token per zero gap is late, and at most two gaps per zero gap are wrong (the 0 and the gap before it). A
  stream's last token is taken as read apart from anything later but the stream's end, which servers write with it;
- **read side, by the event loop's lag** (every client; the only way without kernel receive times: `--client
  openai-sdk`, not Linux): a read comes at most as late as the loop lets the reader run — its lag
  (`runtime.saturation.LoopMonitor`: the highest p99 of a report interval, and the largest lag, of the busiest
  process); a timestamp is late by that much at most, a gap wrong by that much either way.

From the requests to a percentile (`q`: the measured percentiles): if all but a share `f` of the values were moved up
by at most `E` and none down, fewer than p % of the true values lie below `q(p − f) − E` (each is either measured
below `q(p − f)` or in the share `f`), so the true p-th percentile lies between `q(p − f) − E` and `q(p)`: the measured
one is at most `E + q(p) − q(p − f)` above it. Where a moved value may also be smaller (an ITL gap), the bound is
`E + max(q(p) − q(p − f), q(p + f) − q(p))`. The p50 bound reads `E` at the client's p99 (upload p99, lag p99) and
counts the 1 % above it in `f`; the p99 bound at p99.9 (upload p99.9, lag max) with 0.1 %. Where both read sides
apply, the smaller bound holds (each is a bound). Each bound adds the timestamps' resolution: 0.01 ms per kernel
time turned into perf_counter's clock (half `kernel_time.BRACKET_S`; two for a gap), and the histograms' 0.1 % of
the value.

Pure: plain values and histograms in, a plain dict out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llm_locust.metrics.hdr import quantiles
from llm_locust.metrics.window import WindowMetrics

CONVERSION_MS = 0.01
"""The most a kernel receive time can be off once turned into perf_counter's clock (half of `BRACKET_S`), ms."""
HISTOGRAM_SHARE = 0.001
"""A percentile read off the histograms is at most this share of its value above the sample (3 digits)."""
LEVELS = {"p50": (99.0, 1.0), "p99": (99.9, 0.1)}
"""Per percentile bounded: the client's own percentile its `E` is read at, and the share of values above it (%)."""
REMEDY = "add processes (--processes) or worker machines, or run fewer users per process"
"""The remedy of a client that was busy (its busiest process near a core)."""
REMEDY_MACHINE = (
    "the client's processes were not busy, the machine was (other processes took its CPU): run the load generator "
    "where nothing else competes for the CPU"
)
"""The remedy of a client delayed at low CPU."""


@dataclass(frozen=True, slots=True)
class ClientTiming:
    """What the client measured of itself over the run, besides the requests: whether token times are the kernel's
    receive times, the event-loop lag of its busiest process (ms: the highest p99 of a report interval, and the
    largest lag; None: no sample), and whether a process running users was near a core (`busy`: its CPU share at
    `runtime.saturation.CPU_WARN_PCT` or more in an interval)."""

    kernel_timestamps: bool
    lag_p99_ms: float | None
    lag_max_ms: float | None
    busy: bool = False


def _bound_ms(hist: Any, p: float, slack_ms: float, share_pct: float, both_ways: bool, conversions: int) -> float:
    """`slack_ms` + how far the p-th percentile of `hist` (µs) moves when `share_pct` % of its values move — down to
    q(p − share), or (`both_ways`) also up to q(p + share) — + the resolution of `conversions` kernel times and of the
    histogram, ms."""
    share_pct = min(share_pct, 100.0)
    low, mid, high = quantiles(hist, (max(p - share_pct, 0.0), p, min(p + share_pct, 100.0)))
    shift_ms = max(mid - low, high - mid if both_ways else 0) / 1e3
    return round(slack_ms + shift_ms + conversions * CONVERSION_MS + HISTOGRAM_SHARE * mid / 1e3, 3)


def client_error(window: WindowMetrics, timing: ClientTiming, max_ms: float | None) -> dict[str, Any]:
    """The client's error budget of `window`'s successful requests (a run's), as summary.json's `client_error`.

    Returns `{"ttft_ms", "itl_ms", "e2e_ms"}` — each `{"p50", "p99"}`: how many ms the client can have added to (or,
    for ITL, taken from) that percentile, None where not measured (no such latency; the openai SDK's send side, or
    no loop-lag sample without kernel times) —, `kernel_timestamps`, `zero_gaps` (ITL gaps at 0: token events read
    together), `max_ms` (`--max-client-error-ms`; None: the budget is stated, not judged), `limited` (the ITL p99
    bound is above `max_ms`) and `remedy`
    (one line when limited — `REMEDY` when the client was busy, else `REMEDY_MACHINE` —, else None).
    """
    hist = window.hist
    itl, upload = hist.get("itl"), hist.get("upload")
    requests = hist["ttft"].get_total_count() if "ttft" in hist else 0
    gaps = itl.get_total_count() if itl is not None else 0
    zero_gaps = int(itl.get_count_at_index(0)) if gaps else 0  # the first bucket holds 0 alone
    lag = {"p50": timing.lag_p99_ms, "p99": timing.lag_max_ms}
    bounds: dict[str, dict[str, float | None]] = {"ttft_ms": {}, "itl_ms": {}, "e2e_ms": {}}
    for key, (client_pct, above_pct) in LEVELS.items():
        p = float(key[1:])
        # the read side's (extra ms, extra share %) per metric, each way known: by the loop's lag, by the zero gaps
        reads: dict[str, list[tuple[float, float]]] = {"ttft": [], "itl": [], "e2e": []}
        if lag[key] is not None:
            for name in reads:
                reads[name].append((lag[key], above_pct))
        if timing.kernel_timestamps:
            reads["ttft"].append((0.0, 100.0 * zero_gaps / requests if requests else 0.0))
            reads["itl"].append((0.0, 200.0 * zero_gaps / gaps if gaps else 0.0))
            reads["e2e"].append((0.0, 0.0))
        if upload is not None and upload.get_total_count():
            send = (quantiles(upload, (client_pct,))[0] / 1e3, above_pct)
        else:
            send = None
        for name, ways in reads.items():
            latency, gap = hist.get(name), name == "itl"  # a gap: two kernel times, moved either way, no send side
            slack = (0.0, 0.0) if gap else send
            if not ways or slack is None or latency is None or not latency.get_total_count():
                bounds[f"{name}_ms"][key] = None
                continue
            bounds[f"{name}_ms"][key] = min(
                _bound_ms(latency, p, slack[0] + read_ms, slack[1] + read_pct, gap, 2 if gap else 1)
                for read_ms, read_pct in ways
            )
    itl_p99 = bounds["itl_ms"]["p99"]
    limited = max_ms is not None and itl_p99 is not None and itl_p99 > max_ms
    return {
        **bounds,
        "kernel_timestamps": timing.kernel_timestamps,
        "zero_gaps": zero_gaps,
        "max_ms": max_ms,
        "limited": limited,
        "remedy": (REMEDY if timing.busy else REMEDY_MACHINE) if limited else None,
    }


def limited_reason(client: Mapping[str, Any]) -> str | None:
    """The verdict's reason when `client` (summary.json's `client_error`) is limited, else None."""
    if not client or not client.get("limited"):
        return None
    return (
        f"client limited: the client can have moved ITL p99 by up to {client['itl_ms']['p99']:g} ms > "
        f"--max-client-error-ms {client['max_ms']:g} ({client['zero_gaps']} token events read together): "
        f"{client['remedy']}"
    )


def client_error_text(client: Mapping[str, Any]) -> str:
    """summary.json's `client_error` in words: each bound at p50 / p99, then whether the run is within its limit."""

    def pair(key: str) -> str:
        p50, p99 = client[key]["p50"], client[key]["p99"]
        return "not measured" if p50 is None or p99 is None else f"{p50:.3f} / {p99:.3f} ms"

    if client["max_ms"] is None:
        state = "not judged (no --max-client-error-ms)"
    else:
        judged = "CLIENT LIMITED: " + client["remedy"] if client["limited"] else "within"
        state = f"{judged} --max-client-error-ms {client['max_ms']:g} on ITL p99"
    return f"TTFT {pair('ttft_ms')}, ITL {pair('itl_ms')}, E2E {pair('e2e_ms')} — {state}"


def client_error_line(client: Mapping[str, Any]) -> str:
    """The console's line of summary.json's `client_error`."""
    return "Client error (the most the client can have moved p50 / p99): " + client_error_text(client)
