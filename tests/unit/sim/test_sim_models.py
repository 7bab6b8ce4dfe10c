"""Several models in the simulator (`--models`, `--max-loras`, `--lora-load-ms`): the adapters' LRU, the engines'
wait for a load, vLLM's LoRA gauge, and the server over loopback (404 for another model, per-model counts)."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from llm_locust.sim import SimProcess, run_sim
from llm_locust.sim.engine import BatchingEngine, BatchingParams, FixedTiming, Sequence
from llm_locust.sim.latency import Latency
from llm_locust.sim.lora import AdapterSlots, LoraInfo

LOAD_MS = 40.0
TTFT_MS = 10.0


def test_adapter_slots_are_an_lru_of_max_loras() -> None:
    slots = AdapterSlots("base", max_loras=2, load_s=0.04)
    assert slots.ready_s("base", 1.0) == 1.0  # the base model needs no slot
    assert slots.ready_s("a", 1.0) == pytest.approx(1.04)  # loaded
    assert slots.ready_s("a", 1.01) == pytest.approx(1.04)  # resident, but its load is not over yet
    assert slots.ready_s("b", 2.0) == pytest.approx(2.04)
    assert slots.ready_s("a", 3.0) == 3.0  # resident: a and b fit in 2 slots
    assert slots.ready_s("c", 4.0) == pytest.approx(4.04)  # evicts b, the least recently used
    assert slots.ready_s("a", 5.0) == 5.0
    assert slots.ready_s("b", 6.0) == pytest.approx(6.04)  # b was evicted: loaded again
    assert slots.loads == 4
    unlimited = AdapterSlots("base", max_loras=0, load_s=0.04)
    assert [unlimited.ready_s(m, 1.0) for m in ("a", "b", "c")] == [1.0, 1.0, 1.0] and unlimited.loads == 0


def test_fixed_timing_starts_after_the_load() -> None:
    seq = Sequence(prompt_tokens=1, output_tokens=3, t_recv_s=10.0)
    seq.t_ready_s = 10.04
    timing = FixedTiming(Latency("fixed", 10.0), itl_s=0.002)
    timing.start(seq)
    assert timing.due_s(seq, 0) == pytest.approx(10.05)
    assert timing.tokens_due(seq, 10.049) == 0 and timing.tokens_due(seq, 10.0521) == 2


def test_batching_engine_holds_a_loading_sequence_back_without_blocking_others() -> None:
    engine = BatchingEngine(BatchingParams(max_batch=4, decode_step_s=0.01, decode_step_s_per_seq=0.0,
                                           prefill_s_per_token=0.0))  # fmt: skip
    loading, ready = Sequence(1, 2, 0.0), Sequence(1, 2, 0.0)
    loading.t_ready_s = 0.035
    engine.submit(loading, 0.0)
    assert engine.running == [] and engine.step_end_s == pytest.approx(0.035)  # idle until the load ends
    engine.submit(ready, 0.001)
    assert engine.complete_step() == []  # the idle step: then both are admitted at 0.035
    assert engine.running == [loading, ready] and loading.t_admit_s == pytest.approx(0.035)
    assert loading.queue_s == pytest.approx(0.035)  # the wait for the adapter counts as queue time
    engine2 = BatchingEngine(engine.params)
    busy, late = Sequence(1, 10, 0.0), Sequence(1, 1, 0.0)
    late.t_ready_s = 0.025
    engine2.submit(busy, 0.0)
    engine2.submit(late, 0.0)
    engine2.complete_step()  # step ends at 0.01: late not ready at its start (0.0), nor at 0.01
    assert late.t_admit_s is None and engine2.num_waiting == 1
    engine2.complete_step()  # 0.02
    engine2.complete_step()  # 0.03: admitted at the start of the step after its load (0.03)
    assert late.t_admit_s == pytest.approx(0.03)


def test_lora_info_keeps_every_label_set_with_its_time() -> None:
    info = LoraInfo(max_lora=1)
    info.observe(["b", "b"], ["a"], 100.0)
    info.observe([], ["b"], 101.0)
    info.observe(["b"], ["a"], 102.0)
    (family,) = text_string_to_metric_families("\n".join(info.render()) + "\n")
    series = {(s.labels["waiting_lora_adapters"], s.labels["running_lora_adapters"]): s.value for s in family.samples}
    assert series == {("b", "a"): 102.0, ("", "b"): 101.0}
    assert {s.labels["max_lora"] for s in family.samples} == {"1"}


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    args = ("--models", "base,a,b", "--max-loras", "1", "--lora-load-ms", str(LOAD_MS), "--ttft-ms", str(TTFT_MS),
            "--itl-ms", "1", "--output-tokens", "3")  # fmt: skip
    with run_sim(*args) as s:
        yield s


def _call(sim: SimProcess, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=10)
    conn.request(method, path, body=json.dumps(body).encode() if body is not None else None)
    response = conn.getresponse()
    payload = response.read()
    conn.close()
    return response.status, payload


def test_several_models_served_counted_and_loaded(sim: SimProcess) -> None:
    status, body = _call(sim, "GET", "/v1/models")
    cards = json.loads(body)["data"]
    assert status == 200 and [c["id"] for c in cards] == ["base", "a", "b"]
    assert [c.get("parent") for c in cards] == [None, "base", "base"]
    status, body = _call(sim, "POST", "/v1/completions", {"model": "other", "prompt": "x"})
    assert status == 404 and "other" in json.loads(body)["error"]["message"]
    sim.reset()
    for model in ("a", "a", "b", "a", "base", None):  # None: no model named, the base serves it
        body = {"prompt": "one two", "max_tokens": 2, **({"model": model} if model else {})}
        status, payload = _call(sim, "POST", "/v1/completions", body)
        assert status == 200 and json.loads(payload)["model"] == (model or "base")
    trace = sim.trace()
    assert [r["model"] for r in trace] == ["a", "a", "b", "a", "base", "base"]
    loaded = [r["lora_wait_s"] > 0 for r in trace]
    assert loaded == [True, False, True, True, False, False]  # one slot: a, (a resident), b evicts a, a evicts b
    for record in trace:
        ttft_s = record["token_times"][0] - record["t_recv"]
        wait_s = LOAD_MS / 1e3 if record["lora_wait_s"] > 0 else 0.0
        assert record["lora_wait_s"] == pytest.approx(wait_s, abs=1e-6)
        assert ttft_s == pytest.approx(TTFT_MS / 1e3 + wait_s, abs=0.015)
    status, page = _call(sim, "GET", "/metrics")
    families = {f.name: f for f in text_string_to_metric_families(page.decode())}
    counts = {s.labels["model_name"]: s.value for s in families["llm_locust_sim:model_requests"].samples}
    assert counts == {"a": 3, "b": 1, "base": 2}
    lora = families["vllm:lora_requests_info"].samples
    assert lora and {s.labels["max_lora"] for s in lora} == {"1"}
    latest = max(lora, key=lambda s: s.value)
    assert latest.labels["running_lora_adapters"] == "" and latest.labels["waiting_lora_adapters"] == ""


def test_running_adapter_shows_in_the_gauge(sim: SimProcess) -> None:
    body = {"model": "b", "prompt": "one", "max_tokens": 300, "ignore_eos": True}  # 0.3 s of 1 ms tokens
    worker = threading.Thread(target=_call, args=(sim, "POST", "/v1/completions", body))
    worker.start()
    try:
        time.sleep(0.15)
        _, page = _call(sim, "GET", "/metrics")
    finally:
        worker.join(10)
    (family,) = [f for f in text_string_to_metric_families(page.decode()) if f.name == "vllm:lora_requests_info"]
    latest = max(family.samples, key=lambda s: s.value)
    assert latest.labels["running_lora_adapters"] == "b" and latest.labels["waiting_lora_adapters"] == ""


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("--models", "a,a"), "distinct comma-separated names"),
        (("--models", "a,,b"), "distinct comma-separated names"),
        (("--max-loras", "-1"), "--max-loras and --lora-load-ms must be >= 0"),
    ],
)
def test_bad_model_options_fail_in_one_line(args: tuple[str, ...], error: str) -> None:
    done = subprocess.run([sys.executable, "-m", "llm_locust.cli", "sim", "--port", "0", *args], capture_output=True,
                          text=True, timeout=30)  # fmt: skip
    assert done.returncode == 2 and error in done.stderr and "Traceback" not in done.stderr
