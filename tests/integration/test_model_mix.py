"""Several models in one run: `--model-mix` through master + 2 workers against the simulator's `--models` (the model
breakdown's counts are the simulator's, the split the weights'), adapter loads (`--max-loras 1 --lora-load-ms`)
showing in TTFT, and vLLM's LoRA gauge read by the server maps from the simulator's /metrics."""

from __future__ import annotations

import csv
import http.client
import json
import math
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import LOCUSTFILE, read_summary, run_locust
from prometheus_client.parser import text_string_to_metric_families

from llm_locust.report.build import build_report
from llm_locust.scrape.prometheus import extract, parse
from llm_locust.scrape.server_maps import BUILTIN_MAPS, all_maps
from llm_locust.sim import SimProcess, run_sim


def _model_counts(summary: dict[str, Any]) -> dict[str, int]:
    """Requests per label of summary.json's `breakdowns.model` (ok + failed + cancelled)."""
    entries = summary["breakdowns"]["model"]
    return {e["label"]: e["requests_ok"] + e["requests_failed"] + e["requests_cancelled"] for e in entries}


def _get(sim: SimProcess, path: str) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=10)
    conn.request("GET", path)
    body = conn.getresponse().read().decode()
    conn.close()
    return body


def test_mix_through_master_and_two_workers_matches_the_simulator(tmp_path: Path) -> None:
    results = tmp_path / "mix"
    with run_sim("--models", "a,b", "--ttft-ms", "15", "--itl-ms", "2", "--output-tokens", "8") as sim:
        done = run_locust(
            LOCUSTFILE, "--processes", "2", "-u", "8", "-r", "8", "--run-time", "8s", "--stop-timeout", "10",
            "--host", sim.url, "--model-mix", "a=3,b=1", "--seed", "11", "--max-tokens", "8", "--only-summary",
            "--results-dir", str(results),
            timeout_s=120,
        )  # fmt: skip
        trace = Counter(record["model"] for record in sim.trace())
        exposition = _get(sim, "/metrics")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = read_summary(results)
    counts = _model_counts(summary)
    assert counts == dict(trace)  # every request the client counted under a model is one the server served as it
    (family,) = [f for f in text_string_to_metric_families(exposition) if f.name == "llm_locust_sim:model_requests"]
    assert {s.labels["model_name"]: s.value for s in family.samples} == counts
    n = sum(counts.values())
    assert n >= 100 and summary["breakdowns"]["model"][0]["requests_failed"] == 0
    standard_error = math.sqrt(0.75 * 0.25 / n)
    assert abs(counts["a"] / n - 0.75) < 4 * standard_error, (counts, n)
    assert summary["settings"]["model_mix"] == "a=3,b=1"
    report = build_report([results], tmp_path / "report.html", png=False)
    html = report.html_path.read_text()
    assert "by model" in html


def _ttft_p90_ms(results: Path) -> float:
    return read_summary(results)["metrics"]["ttft_ms"]["p90"]


@pytest.mark.alone  # TTFT of an adapter switch within ms
def test_adapter_switches_show_in_ttft_and_in_the_server_metrics(tmp_path: Path) -> None:
    args = ("--models", "base,a,b", "--max-loras", "1", "--lora-load-ms", "40", "--ttft-ms", "10", "--itl-ms", "1",
            "--output-tokens", "4")  # fmt: skip
    with run_sim(*args) as sim:
        runs = {}
        for name, models in (("single", ("--model", "a")), ("mix", ("--model-mix", "a=1,b=1"))):
            runs[name] = tmp_path / name
            done = run_locust(
                LOCUSTFILE, "-u", "4", "-r", "4", "--run-time", "6s", "--host", sim.url, *models, "--seed", "5",
                "--max-tokens", "4", "--only-summary", "--results-dir", str(runs[name]),
                "--metrics-url", f"{sim.url}/metrics", "--metrics-interval-s", "0.25",
            )  # fmt: skip
            assert done.returncode == 0, done.stderr[-3000:]
    single, mix = _ttft_p90_ms(runs["single"]), _ttft_p90_ms(runs["mix"])
    assert single < 35 and mix > single + 25, (single, mix)  # a switch costs a 40 ms load before the prefill
    assert "model" not in read_summary(runs["single"])["breakdowns"]
    by_model = {e["label"]: e for e in read_summary(runs["mix"])["breakdowns"]["model"]}
    assert set(by_model) == {"a", "b"} and all(e["metrics"]["ttft_ms"]["p90"] > 45 for e in by_model.values())
    (entry,) = read_summary(runs["mix"])["server"]["urls"]
    # two adapters: at a scrape, each was seen waiting (loading) or running (which one: by chance)
    assert entry["family"] == "vllm" and entry["lora_running_adapters_max"] + entry["lora_waiting_adapters_max"] >= 1
    with (runs["mix"] / "server_metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    seen = [(float(r["lora_running_adapters"]), float(r["lora_waiting_adapters"])) for r in rows]
    assert seen and all(0 <= running <= 2 and 0 <= waiting <= 2 for running, waiting in seen)
    (entry,) = read_summary(runs["single"])["server"]["urls"]
    assert entry["lora_waiting_adapters_max"] is not None  # the simulator serves adapters: the gauge is there


def test_server_maps_read_the_lora_gauge_of_the_simulator() -> None:
    """Two adapters over one slot, 0.5 s loads: both requests first wait for their load, then both run."""
    args = ("--models", "base,a,b", "--max-loras", "1", "--lora-load-ms", "500", "--ttft-ms", "10", "--itl-ms", "1",
            "--output-tokens", "600")  # fmt: skip
    with run_sim(*args) as sim:
        t0 = time.monotonic()
        threads = []
        for model in ("a", "b"):
            body = json.dumps({"model": model, "prompt": "one two", "max_tokens": 600, "ignore_eos": True})
            thread = threading.Thread(target=_post, args=(sim, body))
            thread.start()
            threads.append(thread)
            time.sleep(0.05)
        try:
            values = []
            for at_s in (0.25, 0.8):  # a: loads to 0.5, runs to 1.1; b: loads to 0.55 (a's slot), runs to 1.15
                time.sleep(max(0.0, t0 + at_s - time.monotonic()))
                family, families = parse(_get(sim, "/metrics"), None, all_maps())
                assert family == "vllm"
                values.append(extract(families, BUILTIN_MAPS["vllm"], time.time()).values)
        finally:
            for thread in threads:
                thread.join(10)
    loading, running = values
    assert (loading["lora_waiting_adapters"], loading["lora_running_adapters"]) == (2, 0)
    assert (loading["waiting"], loading["running"]) == (2, 0)  # held back for its adapter: waiting, as on vLLM
    assert (running["lora_waiting_adapters"], running["lora_running_adapters"]) == (0, 2)
    assert (running["waiting"], running["running"]) == (0, 2)


def _post(sim: SimProcess, body: str) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=10)
    conn.request("POST", "/v1/completions", body=body)
    conn.getresponse().read()
    conn.close()
