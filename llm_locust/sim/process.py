"""Run the simulator as a subprocess, for tests and benchmarks (standard library only).

The simulator always runs in its own process: callers are often gevent-patched Locust processes,
and the simulator must never share a CPU-bound event loop with the client it measures.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class SimStartError(RuntimeError):
    """The simulator subprocess exited or did not become ready in time."""


@dataclass(frozen=True)
class SimProcess:
    """A running simulator: `url` is "http://127.0.0.1:PORT" ("https://..." with --tls-cert); with --replicas,
    the first replica's, and `ports` every replica's port."""

    url: str
    port: int
    process: subprocess.Popen[bytes]
    ports: tuple[int, ...] = ()

    @property
    def replicas(self) -> list[SimProcess]:
        """One `SimProcess` per replica (--replicas N), in port order: each has its own URL and trace."""
        scheme = self.url.partition("://")[0]
        return [SimProcess(f"{scheme}://127.0.0.1:{port}", port, self.process, (port,)) for port in self.ports]

    @property
    def host(self) -> str:
        """Every replica's URL, comma-separated: the --host of a load test against all of them."""
        return ",".join(replica.url for replica in self.replicas)

    @property
    def pid(self) -> int:
        """The simulator's process id."""
        return self.process.pid

    def trace(self) -> list[dict[str, Any]]:
        """Return GET /sim/trace: ground-truth records of finished requests, oldest first."""
        return json.loads(self._request("GET", "/sim/trace"))

    def auth(self) -> dict[str, int]:
        """Return GET /sim/auth: the requests whose credentials were checked, `verified` and `refused`."""
        return json.loads(self._request("GET", "/sim/auth"))

    def reset(self) -> None:
        """POST /sim/reset: forget every trace record and the credential counts."""
        self._request("POST", "/sim/reset")

    def _request(self, method: str, path: str) -> bytes:
        if self.url.startswith("https://"):  # its own control endpoints on loopback: the certificate is the test's
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                "127.0.0.1", self.port, timeout=30, context=ssl._create_unverified_context()
            )
        else:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body=b"" if method == "POST" else None)
            response = conn.getresponse()
            body = response.read()
            if response.status != 200:
                raise RuntimeError(f"{method} {path} -> HTTP {response.status}: {body[:200]!r}")
            return body
        finally:
            conn.close()


@contextlib.contextmanager
def run_sim(*args: str, timeout_s: float = 60) -> Iterator[SimProcess]:
    """Start `llm-locust sim --port 0 ... *args` in a subprocess and yield it once it listens.

    `args` are extra `llm-locust sim` options (e.g. "--ttft-ms", "50"). On exit the process gets
    SIGTERM, then SIGKILL after 5 s. Raises SimStartError (with the subprocess's output) if it
    exits or is not listening within `timeout_s` seconds (generous: a simulator that cannot start exits at once, and
    on a busy machine — a test suite's parallel workers — starting Python and its imports alone took over 10 s).
    """
    with tempfile.TemporaryDirectory(prefix="llm-locust-sim-") as tmp:
        ready_file = Path(tmp) / "port"
        log_path = Path(tmp) / "sim.log"
        command = [sys.executable, "-m", "llm_locust.cli", "sim", "--port", "0", "--ready-file", str(ready_file)]
        with log_path.open("wb") as log:
            process = subprocess.Popen([*command, *args], stdout=log, stderr=subprocess.STDOUT)
        try:
            ports = _wait_ready(process, ready_file, log_path, timeout_s)
            scheme = "https" if "--tls-cert" in args else "http"
            yield SimProcess(f"{scheme}://127.0.0.1:{ports[0]}", ports[0], process, ports)
        finally:
            _stop(process)


def _wait_ready(
    process: subprocess.Popen[bytes], ready_file: Path, log_path: Path, timeout_s: float
) -> tuple[int, ...]:
    """The ports the simulator listens on (one per replica), once its ready file names them."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready_file.exists():
            text = ready_file.read_text().split()
            if text:
                return tuple(int(port) for port in text)
        if process.poll() is not None:
            raise SimStartError(
                f"simulator exited with code {process.returncode}:\n{log_path.read_text(errors='replace')}"
            )
        time.sleep(0.02)
    _stop(process)
    raise SimStartError(f"simulator not ready within {timeout_s} s:\n{log_path.read_text(errors='replace')}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
