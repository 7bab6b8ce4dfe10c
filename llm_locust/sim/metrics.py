"""GET /metrics: a few Prometheus counters and gauges under vLLM's metric names."""

from __future__ import annotations

from collections import Counter


class SimMetrics:
    """Totals since start (not cleared by /sim/reset)."""

    def __init__(self) -> None:
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.requests_by_reason: Counter[str] = Counter()

    def finished(self, prompt_tokens: int, completion_tokens: int, finish_reason: str) -> None:
        """Count one finished (or cancelled: reason "abort") request."""
        self.prompt_tokens_total += prompt_tokens
        self.generation_tokens_total += completion_tokens
        self.requests_by_reason[finish_reason] += 1

    def render(self, model: str, running: int, waiting: int) -> bytes:
        """Return the Prometheus text exposition (version 0.0.4)."""
        label = f'model_name="{model}"'
        lines = [
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{label}}} {running}",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{{{label}}} {waiting}",
            "# TYPE vllm:prompt_tokens_total counter",
            f"vllm:prompt_tokens_total{{{label}}} {self.prompt_tokens_total}",
            "# TYPE vllm:generation_tokens_total counter",
            f"vllm:generation_tokens_total{{{label}}} {self.generation_tokens_total}",
            "# TYPE vllm:request_success_total counter",
        ]
        for reason, count in sorted(self.requests_by_reason.items()):
            lines.append(f'vllm:request_success_total{{{label},finished_reason="{reason}"}} {count}')
        return ("\n".join(lines) + "\n").encode()
