"""Histograms and counters: recording, wire round trip, merge equals union, windows."""

import random
from collections import Counter

from llm_locust.load.arrivals import Step, StepSpan
from llm_locust.metrics.record import ErrorKind, RequestRecord
from llm_locust.metrics.recorder import MetricsRecorder, delta_from_wire, delta_to_wire
from llm_locust.metrics.run_metrics import RunMetrics
from llm_locust.metrics.window import WindowMetrics
from llm_locust.results.outcome import USER_ERROR_CAUSES, diagnose
from llm_locust.results.sections import breakdowns, metric_stats


def make_record(rng, ok=True):
    n = rng.randint(2, 40)
    r = RequestRecord("chat", t_send=0.0)
    r.t_first = rng.uniform(0.05, 0.5)
    t = r.t_first
    for _ in range(n - 1):
        gap = rng.uniform(0.005, 0.05)
        r.itl_us.append(int(gap * 1e6))
        t += gap
    r.t_last, r.events, r.usage_completion_tokens, r.prompt_tokens = t, n, n, 10
    r.t_first_content = r.t_first
    if not ok:
        r.fail(ErrorKind.HTTP_5XX, "HTTP 500")
    return r


def test_record_stats_match_numpy_free_exact_values():
    w = WindowMetrics()
    rng = random.Random(1)
    records = [make_record(rng) for _ in range(500)]
    for r in records:
        w.add(r)
    w.add(make_record(rng, ok=False))
    stats = metric_stats(w)
    ttfts = sorted(r.ttft_s * 1000 for r in records)
    assert stats["ttft_ms"]["count"] == 500
    assert abs(stats["ttft_ms"]["p50"] - ttfts[249]) / ttfts[249] < 0.002
    assert abs(stats["ttft_ms"]["max"] - ttfts[-1]) / ttfts[-1] < 0.002
    assert stats["itl_ms"]["count"] == sum(len(r.itl_us) for r in records)
    assert stats["output_tokens"]["count"] == 500
    assert w.failures == {"http_5xx": 1} and w.requests_ok == 500
    assert w.output_tokens == sum(r.output_tokens for r in records)


def test_merge_of_wire_deltas_equals_the_union():
    rng = random.Random(2)
    recorders = [MetricsRecorder(1.0) for _ in range(3)]
    union = WindowMetrics()
    run = RunMetrics()
    for i in range(300):
        r = make_record(rng, ok=i % 10 != 0)
        recorders[i % 3].record(r, 1000.0 + i * 0.01)
        union.add(r)
    for rec in recorders:
        run.merge_delta(delta_from_wire(delta_to_wire(rec.take_delta())))
        assert not rec.take_delta()
    assert metric_stats(run.total) == metric_stats(union)
    assert run.total.failures == union.failures and run.total.output_tokens == union.output_tokens
    windows = run.pop_windows(float("inf"))
    assert [start for start, _ in windows] == [1000, 1001, 1002]
    assert sum(w.requests_ok + w.requests_failed for _, w in windows) == 300
    assert run.pop_windows(float("inf")) == []


def test_pauses_add_up_over_processes_through_the_wire():
    """Users' backing-off pauses (`load.backoff`) are counted per window, summed over processes, no request added."""
    recorders = [MetricsRecorder(1.0) for _ in range(2)]
    recorders[0].paused(0.25, 1000.5)
    recorders[0].paused(0.5, 1001.2, step=1, measured=True)
    recorders[1].paused(1.75, 1000.9)
    run = RunMetrics()
    for rec in recorders:
        delta = delta_from_wire(delta_to_wire(rec.take_delta()))
        assert delta and delta.requests == 0
        run.merge_delta(delta)
    assert (run.total.backoff_pauses, run.total.backoff_s, run.total.requests_finished) == (3, 2.5, 0)
    assert run.steps[1].backoff_s == 0.5
    assert [(start, w.backoff_s) for start, w in run.pop_windows(float("inf"))] == [(1000, 2.0), (1001, 0.5)]


def test_breakdowns_travel_with_the_delta_and_leave_warmup_out():
    rng = random.Random(3)
    recorders = [MetricsRecorder(1.0) for _ in range(2)]
    expected: dict[tuple[str, str, int], WindowMetrics] = {}
    run = RunMetrics()
    for i in range(400):
        r = make_record(rng, ok=i % 7 != 0)
        r.step, r.measured = (i % 3) - 1, i % 5 != 0  # steps -1, 0, 1; a fifth in warm-up
        replica = f"http://10.0.0.{i % 11}:8000"  # labels may hold ":"; 11 sorts after 2 naturally
        r.groups = (("replica", replica), ("prompt_tokens", ("8-15", "16-31", "512-1023")[i % 3]))
        recorders[i % 2].record(r, 1000.0 + i * 0.01)
        if r.step < 0 or r.measured:
            for dimension, label in r.groups:
                expected.setdefault((dimension, label, r.step), WindowMetrics()).add(r)
    for rec in recorders:
        delta = delta_from_wire(delta_to_wire(rec.take_delta()))
        assert delta.requests == 200
        run.merge_delta(delta)
    assert run.total.requests_ok + run.total.requests_failed == 400  # groups never count twice
    assert {tuple(k): metric_stats(w) for k, w in run.groups.items()} == {
        k: metric_stats(w) for k, w in expected.items()
    }
    spans = tuple(StepSpan(Step(i, 1, None, 10.0, 2.0), 0.0, 2.0, 12.0) for i in range(2))
    document = breakdowns(run, 60.0, spans)
    replicas = [(e["step"], e["label"]) for e in document["replica"]]
    assert replicas == [(step, f"http://10.0.0.{n}:8000") for step in (None, 0, 1) for n in range(11)]
    assert [e["label"] for e in document["prompt_tokens"]] == ["8-15", "16-31", "512-1023"]  # one per step here
    for entry in document["prompt_tokens"]:
        window = expected[("prompt_tokens", entry["label"], -1 if entry["step"] is None else entry["step"])]
        assert entry["requests_ok"] == window.requests_ok and entry["failures"] == dict(window.failures)
        assert entry["throughput"]["duration_s"] == (60.0 if entry["step"] is None else 10.0)


def test_empty_distribution_is_none_not_zero():
    stats = metric_stats(WindowMetrics())
    assert stats["ttft_ms"] == {
        "count": 0, "mean": None, "min": None, "p50": None, "p50_ci95": None, "p90": None, "p90_ci95": None,
        "p95": None, "p95_ci95": None, "p99": None, "p99_ci95": None, "p99_9": None, "p99_9_ci95": None, "max": None,
    }  # fmt: skip


def test_vectorised_percentiles_equal_hdrhistograms_own_and_mean_is_exact():
    rng = random.Random(3)
    window = WindowMetrics()
    values = [
        rng.choice((rng.randint(1, 2000), rng.randint(5000, 60_000), rng.randint(1, 3_000_000))) for _ in range(5000)
    ]
    for v in values:
        window._record("itl", v)
    hist = window.hist["itl"]
    stats = window.distribution("itl")
    for p, key in ((50, "p50"), (90, "p90"), (95, "p95"), (99, "p99"), (99.9, "p99_9")):
        assert stats[key] == min(hist.get_value_at_percentile(p), max(values)), key
    assert stats["mean"] == round(sum(values) / len(values), 3)
    assert stats["min"] == min(values) and stats["max"] == hist.get_max_value()
    assert abs(stats["max"] - max(values)) <= max(values) * 0.001


def test_a_window_makes_only_the_histograms_it_records_into():
    """An empty latency histogram is ~190 KB: a window holds those of the metrics its requests had, and an absent
    metric reads as an empty distribution without being made (agent or connection metrics in a plain run)."""
    window = WindowMetrics()
    assert dict(window.hist) == {}
    window.add(RequestRecord(endpoint="chat", t_send=1.0, t_first=1.05, t_last=1.2, t_done=1.2, events=2,
                             status_code=200, saw_done=True))  # fmt: skip
    assert "ttft" in window.hist and "agent_session" not in window.hist and "connect" not in window.hist
    assert window.distribution("agent_session")["count"] == 0 and "agent_session" not in window.hist
    merged = WindowMetrics()
    merged.merge(window)
    assert set(merged.hist) == {name for name, h in window.hist.items() if h.get_total_count()}
    assert WindowMetrics.from_wire(window.to_wire()).distribution("ttft") == window.distribution("ttft")


def test_diagnosis_tells_a_wrong_host_from_a_server_lost_during_the_run():
    wrong_host = WindowMetrics(failures=Counter(connect=30))
    assert diagnose(wrong_host, "connect: ConnectionRefusedError")[0] == "connect"  # exit code 2: fix the command
    lost = WindowMetrics(failures=Counter(connect=28, transport=2))  # 2 streams cut, then refused connections
    cause, line = diagnose(lost, "connect: ConnectionRefusedError")
    assert cause == "server_lost" and cause not in USER_ERROR_CAUSES  # exit code 1: not the command's fault
    assert "stopped or crashed during the run" in line


def test_step_measured_from_its_steady_start() -> None:
    """A step's requests sent before its steady start count as warm-up, those after as its metrics — also those
    merged after it settled; a step never steady keeps every measured request."""
    rec = MetricsRecorder(1.0)
    for sent_s in (1000.2, 1001.5, 1002.5, 1003.5):
        r = make_record(random.Random(int(sent_s)))
        r.step = 0
        rec.record(r, sent_s + 0.3, sent_s)
    run = RunMetrics()
    run.merge_delta(delta_from_wire(delta_to_wire(rec.take_delta())))
    assert run.steps[0].requests_ok == 4  # not settled: everything measured so far
    assert not run.step_windows.settled(0)
    run.step_windows.settle(0, 1002.0)
    assert (run.steps[0].requests_ok, run.warmup_requests[0]) == (2, 2)
    late = make_record(random.Random(9))
    late.step = 0
    rec.record(late, 1004.1, 1001.9)  # sent before the steady start, reported after it was settled
    run.merge_delta(delta_from_wire(delta_to_wire(rec.take_delta())))
    assert (run.steps[0].requests_ok, run.warmup_requests[0]) == (2, 3)
    assert run.step_windows.to_summary(0, 999.5) == {"settled": True, "reached": True, "after_s": 2.5}
    series = run.step_windows.series[0]
    assert sum(c.requests for c in series.values()) == 5 and series[1000].ttft_ms is not None
    run.step_windows.settle(1, None)
    assert run.step_windows.to_summary(1, 999.5)["reached"] is False
    run.step_windows.settle(2, None, judged=False)  # too short to hold the test's windows: not "never steady"
    assert run.step_windows.to_summary(2, 999.5) == {"settled": True, "reached": None, "after_s": None}


def test_an_unsettled_step_holds_only_the_windows_a_steady_start_may_keep() -> None:
    """`rule_out_before`: the windows sent before the first start still open leave the pending ones for one whole
    (memory flat over a long unsettled step); a step found steady later counts them as warm-up, one never steady keeps
    them all."""
    rec = MetricsRecorder(1.0)
    sends = [1000.0 + t + 0.5 for t in range(30)]
    for sent_s in sends:
        r = make_record(random.Random(int(sent_s)))
        r.step, r.measured = 0, True
        rec.record(r, sent_s + 0.3, sent_s)
        r1 = make_record(random.Random(int(sent_s) + 1))
        r1.step, r1.measured = 1, True
        rec.record(r1, sent_s + 0.3, sent_s)
    delta = rec.take_delta()
    run = RunMetrics()
    run.merge_delta(delta_from_wire(delta_to_wire(delta)))
    windows = run.step_windows
    for step in (0, 1):
        windows.rule_out_before(step, 1025.0)
        windows.rule_out_before(step, 1020.0)  # a bound never moves back
    assert all(sorted(windows._pending[step]) == [1025, 1026, 1027, 1028, 1029] for step in (0, 1))
    assert run.steps[0].requests_ok == 30  # not settled: every measured request so far
    late = make_record(random.Random(99))
    late.step, late.measured = 0, True
    rec.record(late, 1031.0, 1010.5)  # sent before the bound, reported after it: counted, not kept apart
    run.merge_delta(delta_from_wire(delta_to_wire(rec.take_delta())))
    assert sorted(windows._pending[0]) == [1025, 1026, 1027, 1028, 1029] and run.steps[0].requests_ok == 31
    windows.settle(0, 1027.0)  # steady from 1027: the three sent from it on are its metrics, the rest warm-up
    assert (run.steps[0].requests_ok, run.warmup_requests[0]) == (3, 28)
    windows.settle(1, None)  # never steady: every measured request, those ruled out included
    assert (run.steps[1].requests_ok, run.warmup_requests[1]) == (30, 0)
    assert not windows._pending and not windows._early


def test_media_seconds_and_the_real_time_factor_through_the_wire():
    """A request carrying media (`RequestSpec.input_s`: audio) counts its seconds and its E2E; the real-time factor is
    their ratio, and both survive the worker -> master wire and the merge; requests without media add nothing."""
    from llm_locust.metrics.request import RequestSpec
    from llm_locust.results.sections import throughput

    worker = MetricsRecorder(1.0)
    for e2e_s, audio_s in ((0.5, 10.0), (1.5, 10.0), (0.2, 0.0)):
        r = RequestRecord("transcriptions", t_send=0.0, spec=RequestSpec(b"", None, input_s=audio_s))
        r.t_first, r.t_last, r.events = e2e_s / 2, e2e_s, 2
        worker.record(r, 1000.0)
    assert (r.input_s, r.real_time_factor) == (0.0, None)
    merged = RunMetrics()
    merged.merge_delta(delta_from_wire(delta_to_wire(worker.take_delta())))
    run = merged.total
    assert (run.input_s, run.input_e2e_s, run.real_time_factor) == (20.0, 2.0, 0.1)
    figures = throughput(run, 4.0)
    assert (figures["input_s"], figures["input_s_per_s"], figures["real_time_factor"]) == (20.0, 5.0, 0.1)


def test_media_seconds_answered_and_their_real_time_factor_through_the_wire():
    """A request whose answer carries media (`RequestRecord.output_s`: text to speech's audio) counts its seconds and
    its E2E apart from a request's own media; the real-time factor is E2E over the seconds, after the worker -> master
    wire and the merge; failed requests and requests without media add nothing."""
    from llm_locust.results.sections import throughput

    worker = MetricsRecorder(1.0)
    for e2e_s, audio_s, failed in ((0.5, 4.0, False), (1.5, 6.0, False), (0.2, 0.0, False), (0.9, 3.0, True)):
        r = RequestRecord("speech", t_send=0.0)
        r.t_first, r.t_last, r.events, r.output_s = e2e_s / 2, e2e_s, 2, audio_s
        if failed:
            r.fail(ErrorKind.BAD_STREAM, "cut")
        worker.record(r, 1000.0)
    assert RequestRecord("speech", t_send=0.0, t_last=1.0, output_s=4.0).real_time_factor == 0.25
    merged = RunMetrics()
    merged.merge_delta(delta_from_wire(delta_to_wire(worker.take_delta())))
    run = merged.total
    assert (run.output_s, run.output_e2e_s, run.input_s, run.real_time_factor) == (10.0, 2.0, 0.0, 0.2)
    figures = throughput(run, 4.0)
    assert (figures["output_s"], figures["output_s_per_s"], figures["real_time_factor"]) == (10.0, 2.5, 0.2)
