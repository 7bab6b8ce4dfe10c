"""The cached llama.cpp engine (built by engine/build.sh): find it, run `llama-server`, read its metrics.

`find_engine()` reads the cache's engine.json (None until `make engine` completed);
`run_llama_server()` starts the server on a free 127.0.0.1 port — pinned to one core when the
machine has two or more, so the load generator keeps the others — and stops it on exit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from llm_locust.config.link_auth import free_port

ENGINE_DIR_ENV = "LLM_LOCUST_ENGINE_DIR"
MANIFEST_FILE = "engine.json"
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 10.0


def engine_dir() -> Path:
    """The cache folder: $LLM_LOCUST_ENGINE_DIR, else ${XDG_CACHE_HOME:-~/.cache}/llm-locust/engine."""
    if os.environ.get(ENGINE_DIR_ENV):
        return Path(os.environ[ENGINE_DIR_ENV])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "llm-locust" / "engine"


@dataclass(frozen=True)
class Engine:
    """What the cache holds: the server binary, the model, its tokenizer.json, the model's served name."""

    server: Path
    model: Path
    tokenizer: Path
    alias: str


def find_engine(directory: Path | None = None) -> Engine | None:
    """The engine cached in `directory` (default `engine_dir()`), or None when it is not complete."""
    manifest = (directory or engine_dir()) / MANIFEST_FILE
    try:
        entry = json.loads(manifest.read_text())
        engine = Engine(Path(entry["server"]), Path(entry["model"]), Path(entry["tokenizer"]), entry["model_alias"])
    except (OSError, ValueError, KeyError, TypeError):  # absent, or not what build.sh writes
        return None
    if not (os.access(engine.server, os.X_OK) and engine.model.is_file() and engine.tokenizer.is_file()):
        return None
    return engine


@dataclass
class LlamaServer:
    """A running llama-server: its base URL (no /v1), process and log file."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def metrics(self) -> dict[str, float]:
        """The server's `llamacpp:` metrics now: name (without the prefix, a counter with its
        `_total`) -> value."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as response:
            text = response.read().decode()
        return {
            sample.name.removeprefix("llamacpp:"): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name.startswith("llamacpp:")
        }

    def get(self, path: str) -> Any:
        """GET `path` (e.g. /slots); the decoded JSON answer."""
        with urllib.request.urlopen(f"{self.url}{path}", timeout=60) as response:
            return json.loads(response.read())

    def post(self, path: str, body: dict[str, Any]) -> Any:
        """POST `body` as JSON to `path` (e.g. /tokenize); the decoded JSON answer."""
        request = urllib.request.Request(
            f"{self.url}{path}", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())

    def kill(self) -> None:
        """Kill the server at once (SIGKILL), as a crash would."""
        self.process.kill()
        self.process.wait(STOP_TIMEOUT_S)


def pinning() -> list[str]:
    """The command prefix pinning the server to the last CPU this process may use, when there are
    at least two and `taskset` exists; else none."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2 or shutil.which("taskset") is None:
        return []
    return ["taskset", "-c", str(cpus[-1])]


@contextmanager
def run_llama_server(
    engine: Engine, log_path: Path, *extra_args: str, parallel: int = 8, context_tokens: int = 8192
) -> Iterator[LlamaServer]:
    """llama-server with `engine`'s model on a free 127.0.0.1 port, one thread, `parallel` slots
    sharing `context_tokens` of context, Prometheus metrics on, `extra_args` appended; its output
    goes to `log_path`. Yields once /health answers 200; stops the server on exit."""
    port = free_port()
    command = [
        *pinning(), str(engine.server), "-m", str(engine.model), "--alias", engine.alias,
        "--host", "127.0.0.1", "--port", str(port), "-c", str(context_tokens), "-np", str(parallel),
        "-t", "1", "--metrics", *extra_args,
    ]  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    with serving("llama-server", command, url, log_path, READY_TIMEOUT_S) as process:
        yield LlamaServer(url, process, log_path)


@contextmanager
def serving(
    name: str, command: list[str], url: str, log_path: Path, ready_s: float, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen]:
    """Run the server `command` (answering at `url`, its output to `log_path`) for the block: yields its process once
    GET `url`/health answers 200 (its model loaded); RuntimeError naming `name` and the log if it exits or is not
    ready within `ready_s`. Stopped on exit (terminated, killed after STOP_TIMEOUT_S)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + ready_s
        while not _healthy(url):
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with code {process.returncode}; log: {log_path}")
            if time.monotonic() >= deadline:
                raise RuntimeError(f"{name} not ready after {ready_s:.0f} s; log: {log_path}")
            time.sleep(0.2)
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(STOP_TIMEOUT_S)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False
