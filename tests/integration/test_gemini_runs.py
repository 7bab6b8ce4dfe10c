"""Gemini's streamGenerateContent measured by the `locust` CLI — master + 2 worker processes — against the simulator
acting as the Gemini API (its `x-goog-api-key` checked) and as Vertex AI: 0 failures, its counters equal the client's,
TTFT and ITL against its ground-truth trace; the key in no output; a wrong or missing key: exit 2, one line."""

from __future__ import annotations

import os
import statistics
from collections import Counter
from pathlib import Path

import pytest
from conftest import ROOT, read_summary, run_locust
from harness.trace_agreement import (
    assert_streams_agree,
    request_lines,
    served_first_ms,
    served_gaps_ms,
)

from llm_locust.sim import run_sim

LOCUSTFILE = ROOT / "locustfiles" / "gemini.py"
KEY = "AIzaSyPLANTED-gemini-key-7c41e9"
MODEL = "gemini-2.5-flash"
TTFT_MS, ITL_MS, OUTPUT_TOKENS, REQUESTS = 40, 8, 24, 120


def environment(**variables: str) -> dict[str, str]:
    """This process's environment without Google's key variables, plus `variables`."""
    env = {k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY")}
    return {**env, **variables}


def run(sim, tmp_path, *args: str, env: dict[str, str], requests: int = REQUESTS):
    """`requests` requests of locustfiles/gemini.py from master + 2 worker processes against `sim`, each written to
    requests.jsonl."""
    return run_locust(LOCUSTFILE, "--host", sim.url, "--model", MODEL, "-u", "6", "-r", "6", "-t", "60s",
                      "--processes", "2", "--max-requests", str(requests), "--max-tokens", str(OUTPUT_TOKENS),
                      "--prompt-tokens", "32", "--requests-jsonl", "--results-dir", str(tmp_path), *args,
                      env=env)  # fmt: skip


def assert_agrees_with_the_trace(results: Path, trace: list[dict]) -> None:
    """0 failures; requests, prompt and output tokens equal the simulator's; ITL (every gap) and TTFT within 1 ms of
    its own times at p50 and p99 — TTFT's p99 over the requests sent once every user's connection is up (the first
    second: connecting and spawning delay a few sends by 1-4 ms on a shared machine, for every API alike)."""
    summary = read_summary(results)
    m, t = summary["metrics"], summary["throughput"]
    assert summary["failures"] == {} and t["requests_ok"] == len(trace) == REQUESTS
    assert summary["run"]["role"] == "master" and summary["run"]["workers_max"] == 2
    assert t["prompt_tokens"] == sum(r["prompt_tokens"] for r in trace)
    assert t["output_tokens"] == sum(r["completion_tokens"] for r in trace) == OUTPUT_TOKENS * REQUESTS
    assert summary["tokens"]["sources"] == {"usage": REQUESTS} and summary["tokens"]["usage_event_mismatches"] == 0
    assert {r["model"] for r in trace} == {MODEL} and {r["finish_reason"] for r in trace} == {"length"}
    served = {r["id"]: r for r in trace}
    served_ttft_ms, served_itl_ms = served_first_ms(trace), served_gaps_ms(trace)
    assert m["itl_ms"]["count"] == len(served_itl_ms) == (OUTPUT_TOKENS - 1) * REQUESTS
    assert m["ttfo_ms"]["count"] == REQUESTS and m["ttft_ms"]["p50"] == m["ttfo_ms"]["p50"]
    assert abs(statistics.median(served_ttft_ms) - TTFT_MS) < TTFT_MS / 4
    lines = request_lines(results)
    assert {line["request_id"] for line in lines} == set(served)
    assert_streams_agree(m, lines, served, "gemini", ("ttft", "itl"), least=REQUESTS // 2)


@pytest.mark.alone  # TTFT and ITL within 1 ms of the trace
def test_gemini_api_through_master_and_two_workers(tmp_path):
    """--provider gemini: the key from GEMINI_API_KEY in x-goog-api-key (checked by the simulator, which echoes every
    header in its errors), never in any output."""
    with run_sim("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS), "--output-tokens", "64", "--model", MODEL,
                 "--api-key", KEY, "--echo-headers") as sim:  # fmt: skip
        proc = run(sim, tmp_path, "--provider", "gemini", env=environment(GEMINI_API_KEY=KEY))
        trace = sim.trace()
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_summary(tmp_path)
    assert summary["settings"]["provider"] == "gemini" and summary["settings"]["api_key_env"] == "GEMINI_API_KEY"
    assert_agrees_with_the_trace(tmp_path, trace)
    outputs = [proc.stdout, proc.stderr, *(p.read_text() for p in tmp_path.rglob("*") if p.is_file())]
    assert not [text for text in outputs if KEY in text]


@pytest.mark.alone  # TTFT and ITL within 1 ms of the trace
def test_vertex_path_through_master_and_two_workers(tmp_path):
    """--provider vertex: Gemini at the project's and location's path (from Google's variables)."""
    with run_sim("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS), "--output-tokens", "64", "--model",
                 MODEL) as sim:  # fmt: skip
        env = environment(
            GOOGLE_CLOUD_PROJECT="proj-1", GOOGLE_CLOUD_LOCATION="us-central1", GOOGLE_OAUTH_ACCESS_TOKEN="ya29.test"
        )  # a token as given: no OAuth flow (test_oauth_runs)
        proc = run(sim, tmp_path, "--provider", "vertex", env=env)
        trace = sim.trace()
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_summary(tmp_path)
    assert (summary["settings"]["vertex_project"], summary["settings"]["vertex_location"]) == ("proj-1", "us-central1")
    assert_agrees_with_the_trace(tmp_path, trace)
    assert "/v1/projects/proj-1/locations/us-central1/publishers/google/models/{model}" in proc.stderr + proc.stdout


def test_a_wrong_or_missing_key_exits_2_with_one_line(tmp_path):
    """A missing key stops the run before anything is sent; a wrong one (Google answers 400 "API key not valid") fails
    every request: exit 2 with the diagnosis naming the key, the key itself in no output."""
    wrong = KEY[:-1] + "X"
    with run_sim("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "4", "--model", MODEL, "--api-key", KEY,
                 "--echo-headers") as sim:  # fmt: skip
        missing = run_locust(LOCUSTFILE, "--host", sim.url, "--provider", "gemini", "--model", MODEL, "-u", "1", "-t",
                             "5s", "--results-dir", str(tmp_path / "missing"), env=environment())  # fmt: skip
        sent = sim.trace()
        bad = run(sim, tmp_path / "bad", "--provider", "gemini", env=environment(GOOGLE_API_KEY=wrong), requests=4)
    assert missing.returncode == 2 and not sent
    [line] = [line for line in missing.stderr.splitlines() if "ERROR" in line]
    assert line.endswith("--provider gemini needs an API key: set GOOGLE_API_KEY or GEMINI_API_KEY (or name the "
                         "variable with --api-key-env)")  # fmt: skip
    assert bad.returncode == 2, bad.stderr[-3000:]
    assert "the API key was rejected" in bad.stderr + bad.stdout
    outputs = [bad.stdout, bad.stderr, *(p.read_text() for p in (tmp_path / "bad").rglob("*") if p.is_file())]
    assert not [text for text in outputs if wrong in text]


def test_a_model_mix_names_each_request_s_model_in_its_path(tmp_path):
    """--model-mix with Gemini: each request's drawn model goes in its own path (the simulator serves it as that
    model, taken from the path); the model breakdown counts what it served."""
    with run_sim("--models", "gemini-a,gemini-b", "--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "4") as sim:
        proc = run_locust(LOCUSTFILE, "--host", sim.url, "--provider", "gemini", "--model-mix", "gemini-a=1,gemini-b=1",
                          "-u", "4", "-r", "4", "-t", "30s", "--max-requests", "60", "--seed", "5",
                          "--results-dir", str(tmp_path), env=environment(GEMINI_API_KEY=KEY))  # fmt: skip
        served = Counter(record["model"] for record in sim.trace())
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_summary(tmp_path)
    counted = {e["label"]: e["requests_ok"] for e in summary["breakdowns"]["model"]}
    assert summary["failures"] == {} and counted == dict(served) and set(served) == {"gemini-a", "gemini-b"}
    assert sum(served.values()) == 60


def test_fault_kinds_counted_exactly(tmp_path):
    """The simulator fails Gemini streams mid-way with an `error` object of status UNAVAILABLE (`overloaded`) and
    some requests with HTTP 500; the client counts each kind exactly as injected."""
    with run_sim("--ttft-ms", "10", "--itl-ms", "2", "--output-tokens", "8", "--model", MODEL, "--fault",
                 "stream_error=0.3", "--fault", "http_500=0.1", "--fault-seed", "3") as sim:  # fmt: skip
        proc = run_locust(LOCUSTFILE, "--host", sim.url, "--provider", "gemini", "--model", MODEL, "-u", "4", "-r",
                          "4", "-t", "30s", "--max-requests", "80", "--results-dir", str(tmp_path),
                          env=environment(GEMINI_API_KEY=KEY))  # fmt: skip
        trace = sim.trace()
    summary = read_summary(tmp_path)
    injected = Counter(r["fault"] for r in trace if r["fault"])
    assert injected["stream_error"] >= 10 and injected["http_500"] >= 2, (injected, proc.stderr[-2000:])
    assert summary["failures"] == {"overloaded": injected["stream_error"], "http_5xx": injected["http_500"]}
    assert summary["throughput"]["requests_ok"] == len(trace) - sum(injected.values())
