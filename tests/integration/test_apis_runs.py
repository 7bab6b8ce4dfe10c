"""The Responses, Messages and embeddings APIs measured by real Locust runners against the simulator: timings and
usage against its ground-truth trace, fault kinds counted exactly, --provider anthropic's auth, the live view."""

from __future__ import annotations

import json
import os
import statistics
import sys
from collections import Counter
from itertools import pairwise

import gevent
import pytest
from conftest import ROOT, options, read_summary, run_local, run_locust
from harness.browser import browser_tools, chromium_page
from harness.web_ui import http, local_runner_with_web_ui, locust_web_ui

from llm_locust.runtime.users import EmbeddingsUser, MessagesUser, ResponsesUser, TranscriptionsUser
from llm_locust.runtime.web_tabs import tab_rows
from llm_locust.sim import run_sim

TTFT_MS, ITL_MS, OUTPUT_TOKENS = 100, 10, 32


class ResponsesApiUser(ResponsesUser):
    """The Responses user as locustfiles/responses.py defines it."""


class MessagesApiUser(MessagesUser):
    """The Messages user as locustfiles/messages.py defines it."""


class EmbeddingUser(EmbeddingsUser):
    """The embeddings user as locustfiles/embeddings.py defines it."""


class TranscriptionUser(TranscriptionsUser):
    """The speech-to-text user as locustfiles/transcriptions.py defines it."""


USERS = {
    "responses": ResponsesApiUser,
    "messages": MessagesApiUser,
    "embeddings": EmbeddingUser,
    "transcriptions": TranscriptionUser,
}
PATHS = {"responses": "/v1/responses", "messages": "/v1/messages", "embeddings": "/v1/embeddings"}


@pytest.fixture(scope="module")
def sim():
    """Fixed timing: TTFT 100 ms, ITL 10 ms, 32 tokens."""
    with run_sim("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS), "--output-tokens", str(OUTPUT_TOKENS)) as sim:
        yield sim


def run(sim, api: str, tmp_path, *args: str, users: int = 4, seconds: float = 3):
    """A LocalRunner of `api`'s user against `sim`; users finish their request in flight (every request the
    simulator saw is counted by the client)."""
    sim.reset()
    opts = options("--host", sim.url, "--max-tokens", "64", "--results-dir", str(tmp_path), "--interval-s", "1",
                   "--prompt-tokens", "24", *args)  # fmt: skip
    env = run_local(opts, users, seconds, user_classes=[USERS[api]], stop_timeout_s=10)
    gevent.sleep(0.3)
    return env, read_summary(tmp_path), [r for r in sim.trace() if r["endpoint"] == api]


@pytest.mark.alone  # p50s within a quarter of TTFT / half of ITL of the trace
@pytest.mark.parametrize("api", ["responses", "messages"])
def test_streamed_api_against_the_trace(sim, api, tmp_path):
    env, summary, trace = run(sim, api, tmp_path)
    m, t = summary["metrics"], summary["throughput"]
    n = t["requests_ok"]
    assert summary["failures"] == {} and n == len(trace) >= 8
    # usage: output tokens from response.completed / message_delta, prompt tokens from usage / message_start
    assert m["output_tokens"]["min"] == m["output_tokens"]["max"] == OUTPUT_TOKENS
    assert summary["tokens"]["sources"] == {"usage": n} and summary["tokens"]["usage_event_mismatches"] == 0
    assert t["prompt_tokens"] == sum(r["prompt_tokens"] for r in trace)
    # every token event is an ITL sample; TTFT/ITL as the simulator wrote them
    assert m["itl_ms"]["count"] == (OUTPUT_TOKENS - 1) * n and m["ttfo_ms"]["count"] == n
    served_ttft_ms = [(r["token_times"][0] - r["t_recv"]) * 1000 for r in trace]
    served_itl_ms = [(b - a) * 1000 for r in trace for a, b in pairwise(r["token_times"])]
    assert abs(m["ttft_ms"]["p50"] - statistics.median(served_ttft_ms)) < TTFT_MS / 4
    assert abs(m["itl_ms"]["p50"] - statistics.median(served_itl_ms)) < ITL_MS / 2
    assert m["ttft_ms"]["p50"] == pytest.approx(m["ttfo_ms"]["p50"])  # no reasoning: first token = first output
    post = env.stats.get(PATHS[api], "POST")
    assert post.num_requests == n and post.total_content_length == OUTPUT_TOKENS * n


@pytest.mark.alone  # e2e p50 within a quarter of TTFT of the trace
def test_embeddings_against_the_trace(sim, tmp_path):
    env, summary, trace = run(sim, "embeddings", tmp_path, "--embedding-batch", "3")
    m, t = summary["metrics"], summary["throughput"]
    n = t["requests_ok"]
    assert summary["failures"] == {} and n == len(trace) >= 20
    assert t["inputs"] == 3 * n and t["prompt_tokens"] == sum(r["prompt_tokens"] for r in trace)
    assert t["inputs_per_s"] > 0 and t["input_tokens_per_s"] > t["inputs_per_s"]
    assert m["ttft_ms"]["count"] == m["itl_ms"]["count"] == m["output_tokens"]["count"] == 0
    served_ms = [(r["t_done"] - r["t_recv"]) * 1000 for r in trace]  # vectors ready after the prefill
    assert m["e2e_ms"]["count"] == n and abs(m["e2e_ms"]["p50"] - statistics.median(served_ms)) < TTFT_MS / 4
    post = env.stats.get("/v1/embeddings", "POST")
    assert post.num_requests == n and post.total_content_length == t["prompt_tokens"]


@pytest.mark.parametrize(("api", "kind"), [("responses", "response_failed"), ("messages", "overloaded"),
                                           ("embeddings", "http_429")])  # fmt: skip
def test_fault_kinds_counted_exactly(api, kind, tmp_path):
    """The simulator fails streams mid-way with its API's failure event (Responses: response.failed; Messages: an
    overloaded_error event) and throttles some requests; the client counts each kind exactly as injected."""
    fault = "http_429" if api == "embeddings" else "stream_error"
    with run_sim("--ttft-ms", "20", "--itl-ms", "5", "--output-tokens", "16", "--fault", f"{fault}=0.3",
                 "--fault", "http_500=0.1", "--fault-seed", "3") as faulty:  # fmt: skip
        _env, summary, trace = run(faulty, api, tmp_path, seconds=2)
    injected = Counter(r["fault"] for r in trace if r["fault"])
    assert injected[fault] >= 3 and injected["http_500"] >= 1
    assert summary["failures"] == {kind: injected[fault], "http_5xx": injected["http_500"]}
    assert summary["throughput"]["requests_ok"] == len(trace) - sum(injected.values())


def test_anthropic_provider_auth_from_its_environment_variable(tmp_path):
    """--provider anthropic sends x-api-key (from ANTHROPIC_API_KEY) and anthropic-version; the key never appears
    in any output, also when the server echoes it back."""
    key = "sk-ant-SECRET-9f3e1c"
    with run_sim("--ttft-ms", "10", "--itl-ms", "2", "--output-tokens", "8", "--api-key", key,
                 "--echo-headers") as sim:  # fmt: skip
        env = {**os.environ, "ANTHROPIC_API_KEY": key}
        ok = run_locust(ROOT / "locustfiles" / "messages.py", "--host", sim.url, "--provider", "anthropic",
                        "--model", "llm-locust-sim", "-u", "2", "-r", "2", "-t", "2s",
                        "--results-dir", str(tmp_path / "ok"), env=env)  # fmt: skip
        bad = run_locust(ROOT / "locustfiles" / "messages.py", "--host", sim.url, "--provider", "anthropic",
                         "--model", "llm-locust-sim", "-u", "1", "-r", "1", "-t", "1s",
                         "--results-dir", str(tmp_path / "bad"),
                         env={**env, "ANTHROPIC_API_KEY": key[:-1] + "X"})  # fmt: skip
    assert ok.returncode == 0, ok.stderr[-2000:]
    summary = read_summary(tmp_path / "ok")
    assert summary["throughput"]["requests_ok"] >= 4 and summary["failures"] == {}
    assert summary["settings"]["provider"] == "anthropic" and summary["settings"]["api_key_env"] == "ANTHROPIC_API_KEY"
    assert read_summary(tmp_path / "bad")["failures"].get("http_4xx", 0) >= 1  # 401: the echoed key is redacted
    outputs = [ok.stdout, ok.stderr, bad.stdout, bad.stderr]
    outputs += [p.read_text() for p in tmp_path.rglob("*") if p.is_file()]
    assert not [text for text in outputs if key in text or key[:-1] + "X" in text]


def test_refused_combination_exits_2(sim, tmp_path):
    result = run_locust(ROOT / "locustfiles" / "messages.py", "--host", sim.url, "--ignore-eos", "-u", "1", "-t", "1s",
                        "--results-dir", str(tmp_path))  # fmt: skip
    assert result.returncode == 2 and "--ignore-eos: the Messages API has no request field" in result.stderr


@pytest.mark.parametrize("api", ["responses", "embeddings", "transcriptions"])
def test_live_view(sim, api, tmp_path, monkeypatch):
    """The LLM view's JSON and tab rows follow a run of the API while it runs, with its rates in its own units:
    output tokens, embeddings' inputs, speech to text's audio seconds transcribed and real-time factor too."""
    monkeypatch.setattr(sys, "argv", ["locust", "-f", str(ROOT / "locustfiles" / f"{api}.py")])  # the UI parses it
    sim.reset()
    opts = options("--host", sim.url, "--max-tokens", "64", "--results-dir", str(tmp_path), "--interval-s", "1")
    env, runner, web_ui, ui = local_runner_with_web_ui(opts, [USERS[api]])
    try:
        runner.start(2, spawn_rate=2)
        gevent.sleep(2.5)
        snap = json.loads(http(f"{ui}/llm/stats.json"))
    finally:
        runner.quit()
        env.events.quitting.fire(environment=env, reverse=True)
        web_ui.stop()
    summary = snap["summary"]
    assert summary["throughput"]["requests_ok"] >= 2 and summary["failures"] == {}
    rows = {row["metric"]: row["run"] for row in tab_rows(snap)}
    rates = {key: unit for key, unit, _ in snap["rates"]}  # the /llm page's throughput line and steps-table columns
    if api == "embeddings":
        assert (
            float(rows["Inputs/s"]) > 0
            and "Latency ms p50 / p90 / p99" in rows
            and "TTFT ms p50 / p90 / p99" not in rows
        )
        assert rates == {"inputs_per_s": "inputs/s", "input_tokens_per_s": "input tok/s"}
    else:
        assert float(rows["Output tokens/s"]) > 0 and rows["TTFT ms p50 / p90 / p99"] != "- / - / -"
    if api == "transcriptions":
        audio = {"input_s_per_s": "audio in s/s", "real_time_factor": "RTF"}
        assert rates == {"output_tokens_per_s": "output tok/s", **audio}
        assert float(rows["Audio seconds transcribed/s"]) > 0 and float(rows["Real-time factor (E2E / audio s)"]) > 0
        assert len(rows["Real-time factor (E2E / audio s)"].split(".")[1]) == 3  # a factor of 0.013 is not 0.01
    elif api == "responses":
        assert rates == {"output_tokens_per_s": "output tok/s"}


def test_several_tokens_per_event(tmp_path):
    """sim --tokens-per-chunk 4: the first token alone, then 4 per delta event; usage still counts every token."""
    with run_sim("--ttft-ms", "20", "--itl-ms", "5", "--output-tokens", "17", "--tokens-per-chunk", "4") as chunky:
        for api in ("responses", "messages"):
            _env, summary, trace = run(chunky, api, tmp_path / api, users=2, seconds=1.5)
            n, tokens = summary["throughput"]["requests_ok"], summary["tokens"]
            assert summary["failures"] == {} and n == len(trace) >= 4
            assert summary["throughput"]["output_tokens"] == 17 * n and tokens["token_events"] == 5 * n
            assert summary["metrics"]["itl_ms"]["count"] == 4 * n


@pytest.mark.slow
def test_embeddings_on_the_llm_page_in_chromium(sim, tmp_path):
    """The /llm page of an embeddings run shows inputs/s and input tok/s (not output tok/s), as the JSON says."""
    from conftest import wait_for

    browser_tools()  # skips the test, saying why, without Chromium
    command = ["-f", str(ROOT / "locustfiles" / "embeddings.py"), "--host", sim.url, "--results-dir", str(tmp_path),
               "--interval-s", "1", "-u", "2", "-r", "2", "--autostart"]  # fmt: skip
    with locust_web_ui(*command) as web:
        ui = web.url
        with chromium_page() as page:
            problems: list[str] = []
            page.on("pageerror", lambda e: problems.append(str(e)))

            def running() -> bool:
                try:
                    snap = page.request.get(ui + "/llm/stats.json").json()
                except Exception:
                    return False
                return bool(snap["summary"] and snap["summary"]["throughput"]["inputs"])

            wait_for(running, 30, "an embeddings run with inputs")
            page.goto(ui + "/llm")
            page.wait_for_selector('[data-field="run.inputs_per_s"]', timeout=15_000)
            assert float(page.inner_text('[data-field="run.inputs_per_s"]')) > 0
            assert float(page.inner_text('[data-field="run.input_tokens_per_s"]')) > 0
            assert page.query_selector('[data-field="run.output_tokens_per_s"]') is None and not problems
