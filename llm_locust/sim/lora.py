"""Several served models: the base model and its LoRA adapters (`--models`), of which at most `--max-loras` are
resident at once (`--lora-load-ms` to load another), and vLLM's `vllm:lora_requests_info` gauge.

`AdapterSlots` is an LRU of the resident adapters, consulted in request-arrival order as vLLM's worker-side LoRA
manager loads what a batch needs and unloads the least recently used beyond capacity: a request whose adapter is
resident may start its prefill at once (or when that adapter's own load ends); a request for another adapter loads
it — the least recently used one leaves — and waits `load_s` before its prefill. The base model needs no slot. The
wait counts as queue time (vLLM keeps such a request in its waiting queue). A simplification: an adapter still in
use by running requests may be evicted (vLLM would hold the newcomer back instead); its running requests go on.

`LoraInfo` is vLLM's gauge (vllm/v1/metrics/loggers.py, `PrometheusStatLogger`): one series per combination of its
labels `max_lora`, `waiting_lora_adapters` and `running_lora_adapters` (the adapters of the waiting and the running
requests, comma-separated), each set to the Unix time it was last seen (`set_to_current_time`), every combination
ever seen kept — the current state is the series with the largest value. vLLM sets it at each engine step; the
simulator at each scrape of /metrics.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable


class AdapterSlots:
    """The resident adapters (LRU, at most `max_loras`; 0: every adapter always resident, no load) and when each one's
    load ends (perf_counter s)."""

    def __init__(self, base: str, max_loras: int, load_s: float) -> None:
        self.base = base
        self.max_loras = max_loras
        self.load_s = load_s
        self.loads = 0  # adapters loaded so far (each one evicting the least recently used, once full)
        self._resident: OrderedDict[str, float] = OrderedDict()  # adapter -> its load's end

    def ready_s(self, model: str, now_s: float) -> float:
        """When a request for `model` arriving at `now_s` may start its prefill (perf_counter s): `now_s` for the
        base model, a resident adapter (or without a slot limit); else after loading it (the LRU one evicted)."""
        if model == self.base or self.max_loras <= 0:
            return now_s
        resident = self._resident
        if model in resident:
            resident.move_to_end(model)
            return max(now_s, resident[model])
        if len(resident) >= self.max_loras:
            resident.popitem(last=False)
        self.loads += 1
        ready_s = resident[model] = now_s + self.load_s
        return ready_s


class LoraInfo:
    """vLLM's `vllm:lora_requests_info` series, see the module docstring."""

    def __init__(self, max_lora: int) -> None:
        self.max_lora = max_lora
        self._seen: dict[tuple[str, str], float] = {}  # (waiting, running) -> Unix time last seen

    def observe(self, waiting: Iterable[str], running: Iterable[str], now_epoch_s: float) -> None:
        """Set the series of the adapters of the `waiting` and `running` requests (base model left out: vLLM lists
        LoRA requests only) to `now_epoch_s`."""
        key = (",".join(sorted(set(waiting))), ",".join(sorted(set(running))))
        self._seen[key] = now_epoch_s

    def render(self) -> list[str]:
        """The exposition lines: every combination seen, with the time it was last seen."""
        lines = ["# TYPE vllm:lora_requests_info gauge"]
        for (waiting, running), epoch_s in self._seen.items():
            labels = f'max_lora="{self.max_lora}",waiting_lora_adapters="{waiting}",running_lora_adapters="{running}"'
            lines.append(f"vllm:lora_requests_info{{{labels}}} {epoch_s!r}")
        return lines
