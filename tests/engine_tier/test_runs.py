"""Chat and text completions, and the Responses API, against llama.cpp's server, closed and open loop: exact
output lengths with --ignore-eos, the client's token counts against the server's usage and its `llamacpp:`
counters, --tokenizer prompt lengths against the server's, timings against the server's own, the
report. One chat run goes over HTTPS, through a TLS-terminating listener the test puts in front of the server
(`tls_front`), with the same checks.

llama.cpp's server closes the connection after every streamed response although it offers keep-alive: the
runs' exact counts also check that a request meeting such a stale connection is sent again (once, on a new
connection) without the server having processed it twice.

Each run is --max-requests long, so every request ends before the run does (none is cut short):
the server's counters then grow by exactly what the client counted.
"""

from __future__ import annotations

import contextlib
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import gevent
import pytest
import trustme
from gevent import socket as gsocket
from gevent.server import StreamServer

from engine_tier.conftest import EngineRun, run_against

pytestmark = pytest.mark.engine

REQUESTS = 6
MAX_TOKENS = 16
PROMPT_TOKENS = 40
RUNS = {  # name: (locustfile, load options)
    "chat-closed": ("chat.py", ["-u", "1", "-r", "1"]),
    "completions-closed": ("completions.py", ["-u", "2", "-r", "2"]),
    "chat-open": ("chat.py", ["-u", "4", "-r", "4", "--request-rate", "2"]),
    "completions-open": ("completions.py", ["-u", "4", "-r", "4", "--request-rate", "2"]),
    "responses-closed": ("responses.py", ["-u", "2", "-r", "2"]),  # ignore_eos + n_predict work on /v1/responses
    "chat-https": ("chat.py", ["-u", "1", "-r", "1"]),  # over HTTPS, through `tls_front`
}


@contextlib.contextmanager
def tls_front(upstream_url: str, folder: Path) -> Iterator[str]:
    """A TLS-terminating listener on 127.0.0.1 in front of `upstream_url` (plain HTTP): each connection's bytes,
    decrypted, go to a connection of its own to the upstream, and back; closed when either side closes. Its
    certificate is issued by a throw-away CA written to `folder`/ca.pem. Yields its https:// URL."""
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    upstream = urlsplit(upstream_url)

    def relay(source, sink) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)

    def handle(client, _address) -> None:
        server = gsocket.create_connection((upstream.hostname, upstream.port))
        pipes = [gevent.spawn(relay, client, server), gevent.spawn(relay, server, client)]
        gevent.wait(pipes, count=1)
        for sock in (client, server):
            sock.close()
        gevent.killall(pipes)

    listener = StreamServer(("127.0.0.1", 0), handle, ssl_context=context)
    listener.start()
    try:
        yield f"https://127.0.0.1:{listener.server_port}"
    finally:
        listener.stop(timeout=1)


@pytest.fixture(scope="module")
def runs(engine, llama, tmp_path_factory) -> dict[str, EngineRun]:
    """The runs, one after the other on the session's server."""
    folder = tmp_path_factory.mktemp("runs")
    options = [
        "--max-requests", str(REQUESTS), "-t", "60s", "--max-tokens", str(MAX_TOKENS), "--ignore-eos",
        "--server-family", "llamacpp", "--prompt-tokens", str(PROMPT_TOKENS),
        "--tokenizer", str(engine.tokenizer), "--seed", "1",
        "--extra-body", '{"temperature": 0}',  # greedy: the same text each run, so the counts below never vary
    ]  # fmt: skip
    with tls_front(llama.url, folder) as https_url:
        over_tls = ["--host", https_url, "--ca-bundle", str(folder / "ca.pem")]  # the later --host wins
        return {
            name: run_against(
                llama, engine, locustfile, folder / name, *load, *options, *(over_tls if name.endswith("https") else [])
            )
            for name, (locustfile, load) in RUNS.items()
        }


@pytest.fixture(scope="module")
def chat_template_tokens(llama) -> int:
    """How many tokens SmolLM2's chat template adds around one user message (the server's count)."""
    text = "the sun"
    templated = llama.post("/apply-template", {"messages": [{"role": "user", "content": text}]})["prompt"]
    return len(llama.post("/tokenize", {"content": templated})["tokens"]) - len(
        llama.post("/tokenize", {"content": text})["tokens"]
    )


@pytest.mark.parametrize("name", RUNS)
def test_every_request_succeeds_with_exactly_max_tokens(runs, name):
    run = runs[name]
    assert run.done.returncode == 0, run.done.stderr[-3000:]
    summary = run.summary
    assert summary["status"] == "complete"
    assert summary["throughput"]["requests_ok"] == REQUESTS
    assert summary["failures"] == {}
    lengths = summary["metrics"]["output_tokens"]
    assert (lengths["count"], lengths["min"], lengths["max"]) == (REQUESTS, MAX_TOKENS, MAX_TOKENS)
    assert summary["settings"]["server_family"] == "llamacpp"


@pytest.mark.parametrize("name", RUNS)
def test_client_token_counts_equal_the_servers_usage_and_counters(runs, name):
    run = runs[name]
    tokens, throughput = run.summary["tokens"], run.summary["throughput"]
    # usage.completion_tokens for every request, and one token per streamed event
    assert tokens["sources"] == {"usage": REQUESTS}
    assert tokens["token_events"] == REQUESTS * MAX_TOKENS
    assert tokens["usage_event_mismatches"] == 0
    output_tokens = throughput["output_tokens"]
    assert output_tokens == REQUESTS * MAX_TOKENS
    # the server's own counters over the run (read by the test around it)
    assert run.server_delta("tokens_predicted_total") == output_tokens
    prompt_seen = run.server_delta("prompt_tokens_total") + run.server_delta("prompt_tokens_cached_total")
    assert prompt_seen == throughput["prompt_tokens"]
    # ... and as --metrics-url scraped them (first to last scrape of the run)
    (scraped,) = run.summary["server"]["urls"]
    assert scraped["family"] == "llamacpp"
    assert scraped["scrapes_failed"] == 0
    assert scraped["generation_tokens"] == output_tokens
    assert scraped["prompt_tokens"] == run.server_delta("prompt_tokens_total")  # processed, cache hits excluded


@pytest.mark.parametrize("name", RUNS)
def test_tokenizer_prompt_lengths_equal_the_servers(runs, name, chat_template_tokens):
    tokens = runs[name].summary["tokens"]
    assert tokens["prompt_tokens_checked"] == REQUESTS
    if name.startswith("completions"):  # the prompt as sent, no BOS for SmolLM2
        assert tokens["prompt_token_mismatches"] == 0
        assert tokens["prompt_tokens_max_abs_diff"] == 0
    else:  # the chat template's tokens on top of every prompt, nothing else
        assert chat_template_tokens > 0
        assert tokens["prompt_token_mismatches"] == REQUESTS
        assert tokens["prompt_tokens_max_abs_diff"] == chat_template_tokens


@pytest.mark.parametrize("name", RUNS)
def test_client_timings_agree_with_the_servers(runs, name):
    """The client's decode time per request (t_last - t_first = TPOT x (N - 1)) against the server's
    own generation time (llamacpp:tokens_predicted_seconds_total, the same span per request); its
    TTFTs cover at least the server's prompt-processing time. Generous bounds: both clocks see
    the same machine's noise."""
    run = runs[name]
    metrics = run.summary["metrics"]
    client_decode_s = metrics["tpot_ms"]["mean"] * (MAX_TOKENS - 1) * REQUESTS / 1000
    server_decode_s = run.server_delta("tokens_predicted_seconds_total")
    assert server_decode_s > 0
    assert 0.5 * server_decode_s - 0.05 <= client_decode_s <= 1.5 * server_decode_s + 0.2, (
        client_decode_s,
        server_decode_s,
    )
    client_ttft_s = metrics["ttft_ms"]["mean"] * REQUESTS / 1000
    assert client_ttft_s >= 0.9 * run.server_delta("prompt_seconds_total"), client_ttft_s


def test_open_loop_runs_are_paced_by_the_schedule(runs):
    for name in ("chat-open", "completions-open"):
        summary = runs[name].summary
        assert summary["load"]["model"] == "rate"
        assert summary["load"]["rate_per_s"] == 2
        assert summary["metrics"]["queue_delay_ms"]["count"] == REQUESTS
    for name in ("chat-closed", "completions-closed"):
        assert runs[name].summary["metrics"]["queue_delay_ms"]["count"] == 0


def test_the_report_renders_the_engine_runs(runs, tmp_path):
    report = tmp_path / "engine.html"
    folders = [str(run.results) for run in runs.values()]
    done = subprocess.run(
        [sys.executable, "-m", "llm_locust.cli", "report", *folders, "-o", str(report), "--no-png"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    html = report.read_text()
    assert "smollm2" in html
    assert "llamacpp" in html
