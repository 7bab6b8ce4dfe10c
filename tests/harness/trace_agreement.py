"""Our figures against the simulator's own times (its `/sim/trace`): each request's first output and gaps as the
simulator wrote them, the requests a run sent once every user's connection was up, nearest-rank percentiles as the
client's histograms, and the check of p50 within 1 ms and p99 within 3 ms; the simulator's TLS options and the client's
trust for a run over HTTP or HTTPS. The API run tests share it."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path


def tls_args(pki: Path, scheme: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The simulator's certificate options and the client's trust (`pki`: the test certificates) for `scheme`."""
    if scheme == "http":
        return (), ()
    served = ("--tls-cert", str(pki / "good.crt"), "--tls-key", str(pki / "good.key"))
    return served, ("--ca-bundle", str(pki / "ca.pem"))


def percentile(values: list[float], share: float) -> float:
    """The `share` quantile of `values` (nearest rank, as the client's histograms)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * len(ordered)) - 1)]


def request_lines(results: Path) -> list[dict]:
    """requests.jsonl's lines (`--requests-jsonl`) of a results folder."""
    return [json.loads(line) for line in (results / "requests.jsonl").read_text().splitlines()]


def served_first_ms(trace: list[dict]) -> list[float]:
    """Each request's first output as the simulator wrote it, from the request's arrival (ms)."""
    return [(r["token_times"][0] - r["t_recv"]) * 1e3 for r in trace]


def served_gaps_ms(trace: list[dict]) -> list[float]:
    """Every gap between two outputs the simulator wrote (ms)."""
    return [(b - a) * 1e3 for r in trace for a, b in pairwise(r["token_times"])]


def steady(lines: list[dict], warm_s: float = 1.0) -> list[dict]:
    """The requests sent once every user's connection is up: after the run's first `warm_s` (connecting and spawning
    delay a few sends by 1-4 ms on a shared machine, for every API alike)."""
    t_up = min(line["t_send"] for line in lines) + warm_s
    return [line for line in lines if line["t_send"] > t_up]


def first_output_pairs(lines: list[dict], served: dict[str, dict]) -> tuple[list[float], list[float]]:
    """Each request's time to first output, ours (sent → first output read) and the simulator's (arrival → first
    output written), in ms, paired by request id (`served`: the trace by id)."""
    ours = [(line["t_first"] - line["t_send"]) * 1e3 for line in lines]
    truth = [(served[line["request_id"]]["token_times"][0] - served[line["request_id"]]["t_recv"]) * 1e3
             for line in lines]  # fmt: skip
    return ours, truth


def assert_within(
    figures: dict[str, tuple[float, float]], label: str = "", p50_ms: float = 1.0, p99_ms: float = 3.0
) -> None:
    """Print each figure (ours, the simulator's) and hold it within `p50_ms` at p50, `p99_ms` at p99."""
    print(label, {key: (round(ours, 3), round(truth, 3)) for key, (ours, truth) in figures.items()})
    for key, (ours, truth) in figures.items():
        assert abs(ours - truth) <= (p50_ms if "p50" in key else p99_ms), (key, figures)


def assert_streams_agree(
    metrics: dict, lines: list[dict], served: dict[str, dict], label: str, names: tuple[str, str], least: int
) -> None:
    """A run's first output and gaps against the simulator's write times, held by `assert_within`: the first output's
    p50 (summary.json's `metrics`, every request) and p99 (the requests sent once every connection is up: `steady`,
    `least` of them at least), every gap's p50 and p99; `names`: what the API calls its first output and its gaps."""
    trace = list(served.values())
    served_first, served_gaps = served_first_ms(trace), served_gaps_ms(trace)
    kept = steady(lines)
    assert len(kept) >= least, (len(kept), least)
    ours_ms, truth_ms = first_output_pairs(kept, served)
    first, gap = names
    figures = {
        f"{first} p50": (metrics["ttft_ms"]["p50"], percentile(served_first, 0.5)),
        f"{first} p99 (connections up)": (percentile(ours_ms, 0.99), percentile(truth_ms, 0.99)),
        f"{gap} p50": (metrics["itl_ms"]["p50"], percentile(served_gaps, 0.5)),
        f"{gap} p99": (metrics["itl_ms"]["p99"], percentile(served_gaps, 0.99)),
    }
    assert_within(
        figures, f"{label}, {len(kept)} steady"
    )  # within 1 ms on an idle machine; 3 ms at p99 on a loaded one
