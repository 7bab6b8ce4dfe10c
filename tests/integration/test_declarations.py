"""Metrics declared once (`metrics/declarations.py`): a latency added as one declaration reaches every output, and
the counters cross the worker -> master wire exactly, by name."""

from __future__ import annotations

import csv
import json
from dataclasses import fields

import gevent
import pytest
from conftest import options, quit_master, read_summary, run_local, start_master_and_workers

from llm_locust.metrics import declarations
from llm_locust.metrics.declarations import LatencyMetric
from llm_locust.metrics.record import RequestRecord
from llm_locust.metrics.request import RequestSpec
from llm_locust.metrics.window import Counts, WindowMetrics, histogram_names
from llm_locust.report.build import build_report
from llm_locust.runtime.plugin import run_state
from llm_locust.runtime.route import RECORD_KEY
from llm_locust.runtime.web_tabs import step_columns
from llm_locust.runtime.webui import page_html
from llm_locust.sim import run_sim


def time_to_done_s(record: RequestRecord) -> float | None:
    """The throw-away metric's formula (what its record property would be): seconds from send to the stream's end."""
    return None if record.t_done is None else record.t_done - record.t_send


PROBE = LatencyMetric("ttdone", "time to stream end", read_s=time_to_done_s, slo=True, series=True,
                      table_stats=("p50", "p90"))  # fmt: skip
"""A latency declared by this test only: one declaration, nothing else."""


def test_a_latency_declared_once_reaches_summary_series_goodput_live_view_and_report(fast_sim, tmp_path, monkeypatch):
    monkeypatch.setattr(declarations, "LATENCIES", (*declarations.LATENCIES, PROBE))
    run_dir = tmp_path / "run"
    # an objective no request can meet: goodput judges each request by the declared metric too
    opts = options("--host", fast_sim.url, "--max-tokens", "16", "--ignore-eos", "--results-dir", str(run_dir),
                   "--interval-s", "1", "--slo", "ttdone_p99_ms=1")  # fmt: skip
    run_local(opts, users=2, seconds=3.0)

    summary = read_summary(run_dir)
    t, metrics = summary["throughput"], summary["metrics"]
    assert t["requests_ok"] > 5 and summary["failures"] == {}
    probe = metrics["ttdone_ms"]
    assert probe["count"] == t["requests_ok"] == metrics["e2e_ms"]["count"]
    # the stream ends at or after its last token (within the histograms' 0.1 %), and not long after it
    assert metrics["e2e_ms"]["p50"] * 0.999 <= probe["p50"] <= metrics["e2e_ms"]["p50"] + 50
    assert [r["slo"] for r in summary["slo"]] == ["ttdone_p99_ms=1"] and summary["slo"][0]["ok"] is False
    assert summary["slo"][0]["value_ms"] == probe["p99"]
    assert t["requests_good"] == 0 and t["slo_attainment"] == 0.0

    with (run_dir / "llm_timeseries.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {"ttdone_ms_p50", "ttdone_ms_p90", "ttdone_ms_p99"} <= set(rows[0])
    filled = [r for r in rows if int(r["requests_ok"])]
    assert filled and all(float(r["ttdone_ms_p50"]) >= float(r["e2e_ms_p50"]) * 0.999 for r in filled)
    histograms = json.loads((run_dir / "histograms.json").read_text())
    assert "ttdone" in histograms["run"]

    assert '["ttdone_ms_p50","p50"]' in page_html() and '["ttdone_ms","time to stream end ms"]' in page_html()
    assert {"key": "ttdone", "title": "time to stream end ms p50 / p90 / p99"} in step_columns()

    report = build_report([run_dir], tmp_path / "report.html", png=False)
    assert report.rows["ttdone_ms_p90"].iloc[0] == probe["p90"]
    page = report.html_path.read_text(encoding="utf-8")
    assert "time to stream end p50 ms" in page and "time to stream end p90 ms" in page
    assert "time to stream end (ms)" in page  # its latency-vs-load and distribution charts


def test_declarations_check_their_shape():
    with pytest.raises(ValueError, match="exactly one of read_s and values_us"):
        LatencyMetric("x", "X")
    with pytest.raises(ValueError, match="no '_' when --slo may name it"):
        LatencyMetric("time_to_x", "X", read_s=time_to_done_s, slo=True)
    with pytest.raises(KeyError, match="no latency declared as nope"):
        declarations.pick("ttft", "nope")


@pytest.fixture(scope="module")
def faulty_sim():
    """Short fixed timing; some requests fail before their first token (HTTP 500), some after it (stream cut)."""
    with run_sim("--ttft-ms", "20", "--itl-ms", "5", "--output-tokens", "16", "--fault", "http_500=0.1",
                 "--fault", "cut=0.1", "--fault-seed", "7") as sim:  # fmt: skip
        yield sim


def test_master_merges_every_counter_and_histogram_the_two_workers_measured(faulty_sim, tmp_path):
    """Master + 2 workers in process: what the master merged from the wire equals, counter by counter and histogram
    by histogram, what the workers' requests measured (their records, added up apart from the wire)."""
    opts = options("--host", faulty_sim.url, "--max-tokens", "16", "--ignore-eos", "--results-dir", str(tmp_path),
                   "--interval-s", "1", "--cancel-rate", "0.2", "--cancel-after-tokens", "4")  # fmt: skip
    measured = WindowMetrics()

    def measure(context=None, **_):
        record = (context or {}).get(RECORD_KEY)
        if record is not None:
            measured.add(record)

    master_env, master, _ = start_master_and_workers(
        opts, on_worker=lambda _, env: env.events.request.add_listener(measure)
    )
    master.start(6, spawn_rate=6)
    gevent.sleep(4)
    quit_master(master_env)

    merged = run_state(master_env).lead.run.total
    assert merged.requests_ok > 10 and merged.requests_failed > 0 and merged.requests_cancelled > 0
    assert merged.failures["http_5xx"] > 0 and merged.hist["ttft_failed"].get_total_count() > 0  # cut after a token
    for f in fields(Counts):
        assert getattr(merged, f.name) == getattr(measured, f.name), f.name
    for name in histogram_names():
        assert merged.hist[name].get_total_count() == measured.hist[name].get_total_count(), name
        assert merged.sums[name] == measured.sums[name], name
    assert merged.hist["e2e_cancelled"].get_total_count() > 0
    summary = read_summary(tmp_path)
    assert summary["throughput"]["requests_cancelled"] == measured.requests_cancelled
    assert summary["failures"] == dict(measured.failures)


def test_the_wire_names_every_counter():
    """A window on the wire: each counter under its own name (no positional lists), and back exactly."""
    window = WindowMetrics()
    record = RequestRecord("chat", t_send=0.0, t_first=0.1, t_first_content=0.2, t_last=0.5, events=5,
                           usage_completion_tokens=6, reasoning_tokens=2, prompt_tokens=10,
                           spec=RequestSpec(b"", 9, prefix_blocks=(3, 1)), local_output_tokens=7)  # fmt: skip
    record.itl_us.extend([100_000] * 4)
    window.add(record)
    wire = window.to_wire()
    assert set(wire) == {"hist", "sums", "counts"}
    assert set(wire["counts"]) == {f.name for f in fields(Counts)}
    assert all(not isinstance(v, list) for v in wire["counts"].values())
    assert wire["counts"]["reasoning_tokens"] == 2 and wire["counts"]["prompt_max_abs_diff"] == 1
    again = WindowMetrics.from_wire(wire)
    assert all(getattr(again, f.name) == getattr(window, f.name) for f in fields(Counts))
    again.merge(again.from_wire(wire))
    assert again.reasoning_tokens == 4 and again.prompt_max_abs_diff == 1 and again.output_max_abs_diff == 1
