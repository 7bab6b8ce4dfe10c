"""Workloads end to end: real Locust runners against the simulator and a recording server."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time

import gevent
import pytest
from conftest import LOCUSTFILE, ChatUser, new_env, options, read_summary, run_local
from harness.recording_server import REASONING_EVENTS, RecordingServer
from harness.tokenizer import build_tokenizer

from llm_locust.config.settings import Settings
from llm_locust.errors import ConfigError
from llm_locust.runtime.users import CompletionsUser
from llm_locust.workload.input_images import file_data_url, png_bytes
from llm_locust.workload.tokens import token_counter


def completed(sim):
    return [r for r in sim.trace() if not r.get("cancelled")]


def test_synthetic_prompts_hit_their_token_lengths_on_the_server(fast_sim, tmp_path):
    """uniform prompt lengths + a shared prefix: the server counts exactly what the client expected."""
    fast_sim.reset()
    opts = options("--host", fast_sim.url, "--prompt-tokens", "uniform:20,200", "--prefix-tokens", "16",
                   "--max-tokens", "uniform:4,12", "--ignore-eos", "--seed", "7",
                   "--results-dir", str(tmp_path))  # fmt: skip
    run_local(opts, users=4, seconds=3)
    summary = read_summary(tmp_path)
    ok = summary["throughput"]["requests_ok"]
    tokens = summary["tokens"]
    assert ok >= 20 and summary["failures"] == {}
    assert tokens["prompt_tokens_checked"] == ok and tokens["prompt_token_mismatches"] == 0
    prompt_lengths = [r["prompt_tokens"] for r in completed(fast_sim)]
    assert min(prompt_lengths) >= 36 and max(prompt_lengths) <= 216 and len(set(prompt_lengths)) > 10
    outputs = summary["metrics"]["output_tokens"]
    assert 4 <= outputs["min"] < outputs["max"] <= 12  # --ignore-eos: every output is its sampled max_tokens
    assert summary["settings"]["prompt_tokens"] == "uniform:20,200" and summary["settings"]["seed"] == 7


def test_multi_turn_conversations_carry_their_history(fast_sim, tmp_path):
    """One user plays the conversation turn by turn; the simulator counts one token per word of every message."""
    dataset = tmp_path / "chat.json"
    turns = [("human", "a b c"), ("gpt", "d e"), ("human", "f g h i"), ("gpt", "j"), ("human", "k")]
    dataset.write_text(json.dumps([{"conversations": [{"from": f, "value": v} for f, v in turns]}]))
    fast_sim.reset()
    opts = options("--host", fast_sim.url, "--dataset", str(dataset), "--max-tokens", "4",
                   "--results-dir", str(tmp_path / "results"))  # fmt: skip
    run_local(opts, users=1, seconds=1.5)
    lengths = [r["prompt_tokens"] for r in completed(fast_sim)]
    assert len(lengths) >= 6
    assert lengths[:6] == [3, 9, 11, 3, 9, 11]
    summary = read_summary(tmp_path / "results")
    assert summary["tokens"]["prompt_tokens_checked"] == 0  # no --tokenizer: real text is not counted


def test_jsonl_and_csv_prompts_with_the_text_completions_user(fast_sim, tmp_path):
    class TextUser(CompletionsUser):
        pass

    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text('{"prompt": "one two three", "max_tokens": 3}\n{"messages": [{"role": "user", "content": '
                     '"four five"}], "max_tokens": 3}\n')  # fmt: skip
    csv_file = tmp_path / "p.csv"
    csv_file.write_text("prompt,max_tokens\nsix seven,2\n")
    for path, lengths, out in ((jsonl, {2, 3}, 3), (csv_file, {2}, 2)):
        fast_sim.reset()
        results = tmp_path / path.suffix[1:]
        opts = options("--host", fast_sim.url, "--dataset", str(path), "--ignore-eos", "--results-dir", str(results))
        run_local(opts, users=2, seconds=1.5, user_classes=[TextUser])
        summary = read_summary(results)
        assert summary["throughput"]["requests_ok"] >= 4 and summary["failures"] == {}
        assert {r["prompt_tokens"] for r in completed(fast_sim)} == lengths
        assert summary["metrics"]["output_tokens"]["max"] == out


def test_images_are_sent_as_data_urls_and_the_simulator_accepts_them(fast_sim, tmp_path):
    image = tmp_path / "cat.png"
    image.write_bytes(png_bytes(8, 8, random.Random(0)))
    args = ("--image", str(image), "--image-size", "32x16", "--prompt-tokens", "5", "--max-tokens", "3")
    fast_sim.reset()
    opts = options("--host", fast_sim.url, *args, "--results-dir", str(tmp_path / "sim"))
    run_local(opts, users=2, seconds=1.5)
    summary = read_summary(tmp_path / "sim")
    assert summary["throughput"]["requests_ok"] >= 4 and summary["failures"] == {}
    assert {r["prompt_tokens"] for r in completed(fast_sim)} == {5}  # text parts only
    assert summary["tokens"]["prompt_tokens_checked"] == 0  # image tokens are unknown to the client

    with RecordingServer() as server:
        run_local(options("--host", server.url, *args, "--results-dir", str(tmp_path / "rec")), users=1, seconds=0.5)
    parts = server.requests[-1]["body"]["messages"][-1]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "image_url"]
    assert len(parts[0]["text"].split()) == 5
    assert parts[1]["image_url"]["url"] == file_data_url(str(image))
    assert parts[2]["image_url"]["url"].startswith("data:image/png;base64,")


def test_azure_path_api_key_header_and_custom_headers_never_written(tmp_path, monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-secret-1")
    with RecordingServer() as server:
        opts = options("--host", server.url, "--provider", "azure", "--deployment", "gpt4o", "--header",
                       "X-Team: team-secret-2", "--header", "X-Trace: on", "--max-tokens", "7",
                       "--results-dir", str(tmp_path))  # fmt: skip
        run_local(opts, users=1, seconds=0.5)
    posts = [r for r in server.requests if r["method"] == "POST"]
    assert posts and not [r for r in server.requests if r["method"] == "GET"]  # model = the deployment
    request = posts[0]
    assert request["path"] == "/openai/deployments/gpt4o/chat/completions"
    assert request["query"] == "api-version=2024-10-21"
    assert request["headers"]["api-key"] == "azure-secret-1" and "authorization" not in request["headers"]
    assert request["headers"]["x-team"] == "team-secret-2" and request["headers"]["x-trace"] == "on"
    assert request["body"]["max_completion_tokens"] == 7 and "max_tokens" not in request["body"]
    assert request["body"]["model"] == "gpt4o"
    written = "".join(p.read_text() for p in tmp_path.iterdir() if p.is_file())
    assert "azure-secret-1" not in written and "team-secret-2" not in written
    assert read_summary(tmp_path)["settings"]["header"] == ["X-Team", "X-Trace"]


def test_databricks_invocations_with_bearer_token(tmp_path, monkeypatch):
    monkeypatch.setenv("DATABRICKS_TOKEN", "dapi-secret")
    with RecordingServer() as server:
        opts = options("--host", server.url, "--provider", "databricks", "--deployment", "llama-70b",
                       "--results-dir", str(tmp_path))  # fmt: skip
        run_local(opts, users=1, seconds=0.5)
    request = next(r for r in server.requests if r["method"] == "POST")
    assert request["path"] == "/serving-endpoints/llama-70b/invocations"
    assert request["headers"]["authorization"] == "Bearer dapi-secret"
    assert read_summary(tmp_path)["throughput"]["requests_ok"] >= 1


def test_server_family_fields_reach_the_server(tmp_path):
    with RecordingServer() as server:
        opts = options("--host", server.url + "/gateway", "--model", "m", "--server-family", "llamacpp",
                       "--ignore-eos", "--max-tokens", "9", "--results-dir", str(tmp_path))  # fmt: skip
        run_local(opts, users=1, seconds=0.4)
    assert server.requests[0]["path"] == "/gateway/v1/chat/completions"  # a base URL with a path prefix
    body = server.requests[0]["body"]
    assert (body["max_tokens"], body["n_predict"], body["ignore_eos"]) == (9, 9, True)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_reasoning_tokens_and_time_to_first_visible_token(tmp_path):
    with RecordingServer() as server:
        run_local(options("--host", server.url, "--results-dir", str(tmp_path)), users=2, seconds=1.5)
    summary = read_summary(tmp_path)
    ok = summary["throughput"]["requests_ok"]
    assert ok >= 4 and summary["tokens"]["reasoning_tokens"] == REASONING_EVENTS * ok
    m = summary["metrics"]
    # the first visible token comes 3 reasoning events (20 ms apart) after the first token
    assert 40 <= m["ttfo_ms"]["p50"] - m["ttft_ms"]["p50"] <= 200, (m["ttft_ms"], m["ttfo_ms"])


@pytest.mark.alone  # TTFT/ITL of the SDK client against the fast one
def test_openai_sdk_client_records_the_same_metrics(fast_sim, tmp_path):
    fast_sim.reset()
    opts = options("--host", fast_sim.url, "--client", "openai-sdk", "--prompt-tokens", "12", "--max-tokens", "16",
                   "--ignore-eos", "--results-dir", str(tmp_path))  # fmt: skip
    env = run_local(opts, users=2, seconds=2, user_classes=[ChatUser])
    summary = read_summary(tmp_path)
    ok = summary["throughput"]["requests_ok"]
    m = summary["metrics"]
    assert ok >= 4 and summary["failures"] == {}
    assert m["output_tokens"]["min"] == m["output_tokens"]["max"] == 16
    assert 15 <= m["ttft_ms"]["p50"] <= 200 and 3 <= m["itl_ms"]["p50"] <= 50
    assert summary["tokens"]["prompt_token_mismatches"] == 0 and summary["tokens"]["prompt_tokens_checked"] == ok
    assert env.stats.get("/v1/chat/completions", "POST").num_requests == ok


def test_openai_sdk_client_http_errors_are_counted_by_kind(fast_sim, tmp_path):
    opts = options("--host", fast_sim.url, "--client", "openai-sdk", "--model", "nope", "--max-requests", "3",
                   "--results-dir", str(tmp_path))  # fmt: skip
    # until the refusals stop the run (a configuration failure) or 3 requests finished: ends on the count, not on a
    # clock, so a loaded machine's slow first request (the SDK's client) is waited for (30 s at most)
    run_local(opts, users=1, seconds=30, until_stopped=True)
    summary = read_summary(tmp_path)
    assert summary["failures"].get("http_4xx", 0) >= 1 and summary["throughput"]["requests_ok"] == 0


def test_bad_dataset_option_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "fine"}\n{"prompt": \n')
    command = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "-t", "1s",
               "--host", "http://127.0.0.1:9", "--dataset", str(bad)]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert f"{bad}:2: malformed JSON" in proc.stderr and "Traceback" not in proc.stderr


def test_tokenizer_counts_are_checked_against_server_usage(fast_sim, tmp_path):
    """Synthetic prompts sized by a BPE tokenizer match the simulator's word count (single-token words);
    dataset words that are several BPE tokens are counted as mismatches, with their largest difference."""
    tokenizer = build_tokenizer(tmp_path / "tokenizer.json")
    opts = options("--host", fast_sim.url, "--tokenizer", str(tokenizer), "--prompt-tokens", "normal:40,10",
                   "--max-tokens", "2", "--results-dir", str(tmp_path / "synthetic"))  # fmt: skip
    run_local(opts, users=2, seconds=1.5)
    tokens = read_summary(tmp_path / "synthetic")["tokens"]
    assert tokens["prompt_tokens_checked"] >= 4 and tokens["prompt_token_mismatches"] == 0

    dataset = tmp_path / "rare.jsonl"
    dataset.write_text('{"prompt": "zyxwvut qponmlk"}\n')  # 2 words, many byte-level tokens
    opts = options("--host", fast_sim.url, "--tokenizer", str(tokenizer), "--dataset", str(dataset),
                   "--max-tokens", "2", "--results-dir", str(tmp_path / "dataset"))  # fmt: skip
    run_local(opts, users=1, seconds=0.5)
    tokens = read_summary(tmp_path / "dataset")["tokens"]
    expected = token_counter(str(tokenizer)).count("zyxwvut qponmlk")
    assert tokens["prompt_tokens_checked"] == tokens["prompt_token_mismatches"] >= 1
    assert tokens["prompt_tokens_max_abs_diff"] == expected - 2 > 0


def test_settings_validation(monkeypatch):
    with pytest.raises(ConfigError, match="--provider azure needs --deployment"):
        Settings.from_options(options("--provider", "azure"))
    with pytest.raises(ConfigError, match="--ignore-eos: TGI"):
        Settings.from_options(options("--server-family", "tgi", "--ignore-eos"))
    with pytest.raises(ConfigError, match="--ignore-eos: OpenAI"):
        Settings.from_options(options("--provider", "openai", "--ignore-eos"))
    opts = options("--prompt-tokens", "lognormal:300,100", "--header", "A: secret", "--provider", "databricks",
                   "--deployment", "ep")  # fmt: skip
    monkeypatch.setenv("DATABRICKS_TOKEN", "tok")
    settings = Settings.from_options(opts)
    assert (
        settings.endpoint.api_key == "tok"
        and settings.endpoint.server_family == "openai"
        and settings.workload.seed is None
    )
    public = settings.public()
    assert public["header"] == ["A"] and "secret" not in repr(settings) and "secret" not in json.dumps(public)
    opts.seed = "12"  # what the web UI form sends
    assert Settings.from_options(opts).workload.seed == 12


def test_master_workload_options_reach_the_workers(fast_sim, tmp_path):
    """Master + 2 in-process workers: the dataset and length options given to the master drive the workers."""
    dataset = tmp_path / "d.jsonl"
    dataset.write_text('"a b"\n"c d e"\n"f g h i"\n')
    opts = options("--host", fast_sim.url, "--dataset", str(dataset), "--max-tokens", "uniform:2,5", "--ignore-eos",
                   "--seed", "3", "--results-dir", str(tmp_path / "results"))  # fmt: skip
    fast_sim.reset()
    master_env = new_env(opts)
    master = master_env.create_master_runner("127.0.0.1", 0)
    master_env.events.init.fire(environment=master_env, runner=master, web_ui=None)
    for _ in range(2):
        worker_env = new_env(options())
        worker = worker_env.create_worker_runner("127.0.0.1", master.server.port)
        worker_env.events.init.fire(environment=worker_env, runner=worker, web_ui=None)
    deadline = time.monotonic() + 10
    while master.worker_count < 2 and time.monotonic() < deadline:
        gevent.sleep(0.1)
    master.start(4, spawn_rate=4)
    gevent.sleep(2.5)
    master.quit()
    master_env.events.quitting.fire(environment=master_env, reverse=True)
    summary = read_summary(tmp_path / "results")
    assert summary["throughput"]["requests_ok"] >= 8 and summary["failures"] == {}
    assert {r["prompt_tokens"] for r in completed(fast_sim)} == {2, 3, 4}
    outputs = summary["metrics"]["output_tokens"]
    assert outputs["min"] == 2 and outputs["max"] == 5


def test_openai_sdk_client_with_azure_headers_and_reasoning(tmp_path, monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-secret-3")
    with RecordingServer() as server:
        opts = options("--host", server.url, "--provider", "azure", "--deployment", "o3", "--client", "openai-sdk",
                       "--header", "X-Team: t", "--results-dir", str(tmp_path))  # fmt: skip
        run_local(opts, users=1, seconds=2)
    request = next(r for r in server.requests if r["method"] == "POST")
    assert request["path"] == "/openai/deployments/o3/chat/completions" and request["query"] == "api-version=2024-10-21"
    assert request["headers"]["api-key"] == "azure-secret-3" and request["headers"]["x-team"] == "t"
    assert request["body"]["max_completion_tokens"] == 128 and request["body"]["stream_options"]["include_usage"]
    summary = read_summary(tmp_path)
    ok = summary["throughput"]["requests_ok"]
    assert ok >= 2 and summary["tokens"]["reasoning_tokens"] == REASONING_EVENTS * ok
    assert summary["metrics"]["ttfo_ms"]["p50"] - summary["metrics"]["ttft_ms"]["p50"] >= 40
