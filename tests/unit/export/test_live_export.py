"""The live export's metrics, pure: deltas into exact counters and bucketed histograms, Prometheus names and labels."""

import random
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from llm_locust.errors import ConfigError
from llm_locust.export.live import LiveGauges, LiveMetrics
from llm_locust.export.prometheus import LiveCollector, prometheus_name
from llm_locust.export.settings import ExportSettings
from llm_locust.metrics.record import ErrorKind, RequestRecord
from llm_locust.metrics.recorder import MetricsRecorder, delta_from_wire, delta_to_wire
from llm_locust.metrics.run_metrics import RunMetrics


def _record(rng: random.Random, ok: bool = True, replica: str = "", name: str = "") -> RequestRecord:
    r = RequestRecord("chat", t_send=0.0)
    r.t_first = r.t_first_content = rng.uniform(0.001, 3.0)
    t = r.t_first
    for _ in range(rng.randint(1, 20)):
        gap = rng.uniform(0.0001, 0.08)
        r.itl_us.append(round(gap * 1e6))
        t += gap
    r.t_last, r.events, r.usage_completion_tokens, r.prompt_tokens = t, len(r.itl_us) + 1, len(r.itl_us) + 1, 7
    r.groups = (*((("replica", replica),) if replica else ()), *((("name", name),) if name else ()))
    if not ok:
        r.fail(ErrorKind.HTTP_5XX, "HTTP 500")
    return r


def _scrape(live: LiveMetrics, run: RunMetrics) -> dict[tuple[str, frozenset], float]:
    """The exposition text parsed back: {(sample name, its non-empty labels): value}."""
    gauges = LiveGauges(run="r1", in_flight=3, users=5, last_window={"ttft_ms_p99": 12.5}, total=run.total)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LiveCollector(lambda: (live, gauges)))
    return {
        (s.name, frozenset((k, v) for k, v in s.labels.items() if v)): s.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for s in family.samples
    }


def _merged(seed: int = 7) -> tuple[LiveMetrics, RunMetrics, list[RequestRecord]]:
    """Four processes' deltas of 50 requests each (one in ten failed, two replicas, a scenario's names on two in
    three), merged and exported."""
    rng = random.Random(seed)
    live, run = LiveMetrics(), RunMetrics()
    records = []
    for _ in range(4):  # four processes' deltas, each counted once
        recorder = MetricsRecorder(5.0)
        for i in range(50):
            record = _record(rng, ok=i % 10 != 0, replica=str(i % 2), name=("", "ask", "follow-up")[i % 3])
            records.append(record)
            recorder.record(record, 1_000.0)
        delta = delta_from_wire(delta_to_wire(recorder.take_delta()))
        run.merge_delta(delta)
        live.add(delta)
    return live, run, records


def test_deltas_become_exact_counts_and_buckets_with_one_series_per_breakdown_label() -> None:
    live, run, records = _merged()
    ok = [r for r in records if r.ok]
    samples = _scrape(live, run)

    def value(sample: str, **labels: str) -> float:
        return samples[(sample, frozenset({"run": "r1", **labels}.items()))]

    assert value("llm_locust_requests_total", outcome="ok") == len(ok)
    assert value("llm_locust_requests_total", outcome="failed", error_type="http_5xx") == len(records) - len(ok)
    assert value("llm_locust_output_tokens_total") == sum(r.output_tokens for r in ok)
    ttft = "gen_ai_server_time_to_first_token_seconds"
    assert value(f"{ttft}_count") == len(ok)
    assert abs(value(f"{ttft}_sum") - sum(round(r.ttft_s * 1e6) for r in ok) / 1e6) < 1e-6
    for le in ("0.005", "0.25", "1.0", "2.5"):  # exact below 2.048 ms; within one HdrHistogram bucket above
        exact = sum(round(r.ttft_s * 1e6) <= float(le) * 1e6 for r in ok)
        near = sum(abs(round(r.ttft_s * 1e6) - float(le) * 1e6) <= float(le) * 1e6 * 1e-3 for r in ok)
        assert abs(value(f"{ttft}_bucket", le=le) - exact) <= near, le
    assert value(f"{ttft}_bucket", le="+Inf") == len(ok)
    assert value("llm_locust_itl_seconds_count") == sum(len(r.itl_us) for r in ok)
    assert value("llm_locust_itl_seconds_bucket", le="0.001") == sum(g <= 1000 for r in ok for g in r.itl_us)
    for replica in ("0", "1"):
        assert value(f"{ttft}_count", replica=replica) == sum(("replica", replica) in r.groups for r in ok)
    for name in ("ask", "follow-up"):  # a scenario's names: one series each, beside the totals (counted once there)
        named = [r for r in records if ("name", name) in r.groups]
        assert value("llm_locust_requests_total", name=name, outcome="ok") == sum(r.ok for r in named) > 0
        assert value("llm_locust_requests_total", name=name, outcome="failed", error_type="http_5xx") == sum(
            not r.ok for r in named
        )
        assert value(f"{ttft}_count", name=name) == sum(r.ok for r in named)
    assert not any(dict(labels).keys() >= {"name", "replica"} for _, labels in samples)  # one dimension a series
    quantile = "llm_locust_latency_quantile_seconds"
    assert value(quantile, metric="ttft", quantile="0.99", window="last") == 0.0125
    p50_ms = run.total.distribution("ttft", scale=1e3)["p50"]  # summary.json's
    assert value(quantile, metric="ttft", quantile="0.5", window="run") == pytest.approx(p50_ms / 1e3, rel=1e-12)
    assert value("llm_locust_users") == 5
    assert value("llm_locust_requests_in_flight") == 3


def test_names_follow_the_otel_prometheus_exporter() -> None:
    assert prometheus_name("gen_ai.server.time_to_first_token", "s") == "gen_ai_server_time_to_first_token_seconds"
    assert prometheus_name("gen_ai.client.token.usage") == "gen_ai_client_token_usage"


@pytest.mark.parametrize(
    ("port", "host", "message"),
    [("70000", "127.0.0.1", "--prometheus-port must be a TCP port"), ("x", "127.0.0.1", "--prometheus-port must be a "
     "whole number"), ("9646", " ", "--prometheus-host must name an address")],
)  # fmt: skip
def test_bad_export_options_are_one_line_naming_the_option(port: str, host: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ExportSettings.from_options(SimpleNamespace(prometheus_port=port, prometheus_host=host))
    assert (
        ExportSettings.from_options(SimpleNamespace(prometheus_port=0, prometheus_host="0.0.0.0")).prometheus_port == 0
    )


def test_otlp_data_points_are_the_same_series_with_per_bucket_counts() -> None:
    otlp = pytest.importorskip(
        "llm_locust.export.otlp", reason="the OpenTelemetry SDK (pip install 'llm-locust[otel]')"
    )
    from opentelemetry.sdk.resources import Resource

    live, run, records = _merged()
    ok = [r for r in records if r.ok]
    gauges = LiveGauges(run="r1", in_flight=3, users=5, last_window=None, total=run.total)
    data = otlp.metrics_data(live, gauges, 1, 2, Resource.create({}))
    (scope,) = data.resource_metrics[0].scope_metrics
    metrics = {m.name: m.data.data_points for m in scope.metrics}
    points = {tuple(sorted(p.attributes.items())): p for p in metrics["gen_ai.server.time_to_first_token"]}
    total = points[(("run", "r1"),)]
    assert (
        total.count == sum(total.bucket_counts) == len(ok)
        and len(total.bucket_counts) == len(total.explicit_bounds) + 1
    )
    assert total.min <= min(r.ttft_s for r in ok) * (1 + 1e-3) and total.max >= max(r.ttft_s for r in ok) * (1 - 1e-3)
    assert points[(("replica", "0"), ("run", "r1"))].count + points[(("replica", "1"), ("run", "r1"))].count == len(ok)
    requests = {tuple(sorted(p.attributes.items())): p.value for p in metrics["llm_locust.requests"]}
    assert requests[(("error.type", "http_5xx"), ("outcome", "failed"), ("run", "r1"))] == len(records) - len(ok)
    named = [r for r in ok if ("name", "ask") in r.groups]
    assert points[(("name", "ask"), ("run", "r1"))].count == len(named) > 0  # a scenario's name: an attribute
    (tokens,) = [p for p in metrics["gen_ai.client.token.usage"] if not p.attributes.keys() & {"replica", "name"}]
    assert tokens.attributes["gen_ai.token.type"] == "output" and tokens.count == len(ok)
    assert [p.value for p in metrics["llm_locust.users"]] == [5]


def test_scored_answers_are_exported_as_counters_per_series():
    """The answer counters (`live.COUNTERS`) count each scored answer once, in the totals and in its breakdown."""
    rng = random.Random(3)
    live, run = LiveMetrics(), RunMetrics()
    for _ in range(2):  # two processes
        recorder = MetricsRecorder(5.0)
        for i in range(30):
            record = _record(rng, ok=i % 10 != 0, name=("ask", "pick")[i % 2])
            record.score = (None, 1.0, 0.0, 0.5)[i % 4]  # a failed request's score is not counted
            recorder.record(record, 1_000.0)
        delta = delta_from_wire(delta_to_wire(recorder.take_delta()))
        run.merge_delta(delta)
        live.add(delta)
    samples = _scrape(live, run)
    totals = frozenset({("run", "r1")})
    scored = samples[("llm_locust_answers_scored_total", totals)]
    assert scored == run.total.answers_scored > 0
    assert samples[("llm_locust_answers_correct_total", totals)] == run.total.answers_correct
    assert samples[("llm_locust_answer_score_sum_total", totals)] == run.total.answer_score_sum
    by_name = sum(samples[("llm_locust_answers_scored_total", totals | {("name", n)})] for n in ("ask", "pick"))
    assert by_name == scored


def test_inputs_are_exported_as_a_counter_per_series():
    """The documents of rerank requests (`Counts.inputs`) are `llm_locust_inputs_total`, once each, per name."""
    live, run = LiveMetrics(), RunMetrics()
    for _ in range(2):  # two processes
        recorder = MetricsRecorder(5.0)
        for i in range(20):
            record = RequestRecord("rerank", t_send=0.0)
            record.t_done = record.t_last = 0.05
            record.inputs, record.prompt_tokens = 4, 30
            record.groups = (("name", ("rank", "again")[i % 2]),)
            if i % 5 == 0:
                record.fail(ErrorKind.HTTP_5XX, "HTTP 500")  # a failed request's inputs are not counted
            recorder.record(record, 1_000.0)
        delta = delta_from_wire(delta_to_wire(recorder.take_delta()))
        run.merge_delta(delta)
        live.add(delta)
    samples = _scrape(live, run)
    totals = frozenset({("run", "r1")})
    assert samples[("llm_locust_inputs_total", totals)] == run.total.inputs == 2 * 16 * 4
    by_name = sum(samples[("llm_locust_inputs_total", totals | {("name", n)})] for n in ("rank", "again"))
    assert by_name == run.total.inputs


def test_output_bytes_are_exported_as_a_counter_per_series():
    """The decoded bytes of images (`Counts.output_bytes`) are `llm_locust_output_bytes_total`, per series, beside the
    images (`llm_locust_inputs_total`): bytes per image is their ratio."""
    live, run = LiveMetrics(), RunMetrics()
    recorder = MetricsRecorder(5.0)
    for i in range(10):
        record = RequestRecord("images", t_send=0.0)
        record.t_done = record.t_last = 0.05
        record.inputs, record.output_bytes = 2, 2 * 16_384
        if i % 5 == 0:
            record.fail(ErrorKind.BAD_STREAM, "no image")  # a failed request's bytes are not counted
        recorder.record(record, 1_000.0)
    delta = delta_from_wire(delta_to_wire(recorder.take_delta()))
    run.merge_delta(delta)
    live.add(delta)
    samples = _scrape(live, run)
    totals = frozenset({("run", "r1")})
    assert samples[("llm_locust_output_bytes_total", totals)] == run.total.output_bytes == 8 * 2 * 16_384
    assert run.total.output_bytes_per_input == 16_384.0


def test_media_seconds_are_exported_as_a_counter_per_series():
    """The seconds of audio successful requests carried (`Counts.input_s`) are `llm_locust_input_seconds_total`:
    audio seconds transcribed per second is its rate."""
    from llm_locust.metrics.request import RequestSpec

    live, run = LiveMetrics(), RunMetrics()
    recorder = MetricsRecorder(5.0)
    for i in range(10):
        record = RequestRecord("transcriptions", t_send=0.0, spec=RequestSpec(b"", None, input_s=2.5))
        record.t_first = record.t_done = record.t_last = 0.05
        record.events = 1
        if i % 5 == 0:
            record.fail(ErrorKind.BAD_STREAM, "no text")  # a failed request's audio is not counted
        recorder.record(record, 1_000.0)
    delta = delta_from_wire(delta_to_wire(recorder.take_delta()))
    run.merge_delta(delta)
    live.add(delta)
    samples = _scrape(live, run)
    assert samples[("llm_locust_input_seconds_total", frozenset({("run", "r1")}))] == run.total.input_s == 8 * 2.5


def test_media_seconds_answered_are_exported_as_a_counter_per_series():
    """The seconds of audio successful requests' answers carried (`Counts.output_s`: text to speech) are
    `llm_locust_output_seconds_total`: audio seconds produced per second is its rate."""
    live, run = LiveMetrics(), RunMetrics()
    recorder = MetricsRecorder(5.0)
    for i in range(10):
        record = RequestRecord("speech", t_send=0.0, output_s=1.5)
        record.t_first = record.t_done = record.t_last = 0.05
        record.events = 1
        if i % 5 == 0:
            record.fail(ErrorKind.BAD_STREAM, "cut")  # a failed request's audio is not counted
        recorder.record(record, 1_000.0)
    delta = delta_from_wire(delta_to_wire(recorder.take_delta()))
    run.merge_delta(delta)
    live.add(delta)
    samples = _scrape(live, run)
    assert samples[("llm_locust_output_seconds_total", frozenset({("run", "r1")}))] == run.total.output_s == 8 * 1.5
