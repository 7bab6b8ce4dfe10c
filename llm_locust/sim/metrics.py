"""GET /metrics: Prometheus counters, gauges and histograms under vLLM's metric names.

Everything comes from the simulator's real state: the running batch and the waiting queue of
the timing driver, the token counters of finished requests, and one histogram observation per
finished request (time to first token, time per output token, end-to-end latency, queue time),
taken from its trace record. Nothing is recorded per token. The prefix cache's counters are vLLM v1's
(`vllm:prefix_cache_queries_total` / `vllm:prefix_cache_hits_total`, in tokens; 0 without a cache). vLLM labels
everything with its base model's name and counts no request per adapter; with adapters vLLM's
`vllm:lora_requests_info` follows (`llm_locust.sim.lora`). The simulator's own counters (no vLLM equivalent) are
named `llm_locust_sim:*`: `llm_locust_sim:model_requests_total{model_name}`, the finished requests per served model
(`--models`); `llm_locust_sim:tool_calls_total`, the responses that answered with a tool call and ran to their end;
and `llm_locust_sim:tool_calls_malformed_total`, those of them whose arguments were made malformed
(`--tool-call-malformed-rate`); `llm_locust_sim:answers_total{kind}`, the answers of the responses that ran to their end
without a fault, by kind (correct, wrong, valid_json, invalid_json: `llm_locust.sim.answers`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter

from llm_locust.sim.answers import KINDS as ANSWER_KINDS
from llm_locust.sim.trace import TraceRecord

BUCKETS_S = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
"""Upper bounds (seconds) of the latency histograms' buckets (+Inf implied)."""


class Histogram:
    """A Prometheus histogram: per-bucket counts (not cumulative), sum and count, in seconds."""

    __slots__ = ("buckets", "count", "sum_s")

    def __init__(self) -> None:
        self.buckets = [0] * (len(BUCKETS_S) + 1)
        self.sum_s = 0.0
        self.count = 0

    def observe(self, value_s: float) -> None:
        """Record one observation of `value_s` seconds."""
        self.buckets[bisect_left(BUCKETS_S, value_s)] += 1
        self.sum_s += value_s
        self.count += 1

    def render(self, name: str, label: str) -> list[str]:
        """The exposition lines of this histogram (cumulative buckets, _sum, _count)."""
        lines = [f"# TYPE {name} histogram"]
        cumulative = 0
        for bound, count in zip((*(repr(b) for b in BUCKETS_S), "+Inf"), self.buckets, strict=True):
            cumulative += count
            lines.append(f'{name}_bucket{{{label},le="{bound}"}} {cumulative}')
        lines.append(f"{name}_sum{{{label}}} {self.sum_s!r}")
        lines.append(f"{name}_count{{{label}}} {self.count}")
        return lines


class SimMetrics:
    """Totals since start (not cleared by /sim/reset)."""

    def __init__(self) -> None:
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.prefix_cache_queries_total = 0  # prompt tokens looked up in the prefix cache (vLLM: queried tokens)
        self.prefix_cache_hits_total = 0  # ... of which cached (whole 512-token blocks)
        self.requests_by_reason: Counter[str] = Counter()
        self.requests_by_model: Counter[str] = Counter()
        self.tool_calls_total = 0
        self.tool_calls_malformed_total = 0
        self.answers_by_kind: Counter[str] = Counter({kind: 0 for kind in ANSWER_KINDS})
        self.ttft = Histogram()
        self.tpot = Histogram()
        self.e2e = Histogram()
        self.queue = Histogram()

    def looked_up(self, prompt_tokens: int, hit_tokens: int) -> None:
        """Count one prefix-cache lookup of `prompt_tokens` tokens, `hit_tokens` of them cached."""
        self.prefix_cache_queries_total += prompt_tokens
        self.prefix_cache_hits_total += hit_tokens

    def finished(self, record: TraceRecord) -> None:
        """Count one finished (or cancelled: reason "abort") request; a request that ran to its
        end is observed in the latency histograms (seconds, from the server's clock)."""
        tokens = record.completion_tokens
        self.prompt_tokens_total += record.prompt_tokens
        self.generation_tokens_total += tokens
        self.requests_by_model[record.model] += 1
        reason = record.finish_reason or "abort"
        self.requests_by_reason["stop" if reason == "tool_calls" else reason] += 1  # vLLM's engine: a stop
        if record.tool_call is not None and record.finish_reason:
            self.tool_calls_total += 1
            self.tool_calls_malformed_total += record.tool_call.malformed
        answer = record.answer
        if answer is not None and answer.kind is not None and record.finish_reason and record.fault is None:
            self.answers_by_kind[answer.kind] += 1
        if record.cancelled or not record.finish_reason or not record.token_times:
            return
        times = record.token_times
        self.ttft.observe(times[0] - record.t_recv)
        if len(times) >= 2 and tokens >= 2:
            self.tpot.observe((times[-1] - times[0]) / (len(times) - 1))
        self.e2e.observe(record.t_done - record.t_recv)
        self.queue.observe(record.queue_s)

    def render(self, model: str, running: int, waiting: int, max_batch: int, extra: list[str] | None = None) -> bytes:
        """Return the Prometheus text exposition (version 0.0.4), `extra` lines (whole families) at the end; KV-cache
        usage is the running batch's share of `max_batch` slots (0..1)."""
        label = f'model_name="{model}"'
        kv_usage = min(1.0, running / max_batch) if max_batch > 0 else 0.0
        lines = [
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{label}}} {running}",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{{{label}}} {waiting}",
            "# TYPE vllm:kv_cache_usage_perc gauge",
            f"vllm:kv_cache_usage_perc{{{label}}} {kv_usage!r}",
            "# TYPE vllm:prompt_tokens_total counter",
            f"vllm:prompt_tokens_total{{{label}}} {self.prompt_tokens_total}",
            "# TYPE vllm:generation_tokens_total counter",
            f"vllm:generation_tokens_total{{{label}}} {self.generation_tokens_total}",
            "# TYPE vllm:prefix_cache_queries_total counter",
            f"vllm:prefix_cache_queries_total{{{label}}} {self.prefix_cache_queries_total}",
            "# TYPE vllm:prefix_cache_hits_total counter",
            f"vllm:prefix_cache_hits_total{{{label}}} {self.prefix_cache_hits_total}",
            "# TYPE vllm:request_success_total counter",
        ]
        for reason, count in sorted(self.requests_by_reason.items()):
            lines.append(f'vllm:request_success_total{{{label},finished_reason="{reason}"}} {count}')
        lines += self.ttft.render("vllm:time_to_first_token_seconds", label)
        lines += self.tpot.render("vllm:time_per_output_token_seconds", label)
        lines += self.e2e.render("vllm:e2e_request_latency_seconds", label)
        lines += self.queue.render("vllm:request_queue_time_seconds", label)
        lines.append("# TYPE llm_locust_sim:model_requests_total counter")
        for name, count in sorted(self.requests_by_model.items()):
            lines.append(f'llm_locust_sim:model_requests_total{{model_name="{name}"}} {count}')
        lines += [
            "# TYPE llm_locust_sim:tool_calls_total counter",
            f"llm_locust_sim:tool_calls_total{{{label}}} {self.tool_calls_total}",
            "# TYPE llm_locust_sim:tool_calls_malformed_total counter",
            f"llm_locust_sim:tool_calls_malformed_total{{{label}}} {self.tool_calls_malformed_total}",
        ]
        lines.append("# TYPE llm_locust_sim:answers_total counter")
        for kind, count in sorted(self.answers_by_kind.items()):
            lines.append(f'llm_locust_sim:answers_total{{{label},kind="{kind}"}} {count}')
        lines += extra or ()
        return ("\n".join(lines) + "\n").encode()
