"""Redirects are never followed (`transport.redirects`): a server answering 3xx to another private port gets no
request there, from either client nor from the model lookup; the run fails with `redirect`, its reason naming the
Location without its query, and does not pass."""

from __future__ import annotations

import os

import pytest
from conftest import LOCUSTFILE, read_summary, run_locust
from gevent.pywsgi import WSGIServer
from harness.recording_server import LoopbackServer, RecordingServer

from llm_locust.metrics.record import ErrorKind

QUERY_SECRET = "sig=QUERY-TOKEN-5b1f"
KEY = "sk-redirect-SECRET-77aa10"


class Redirector(LoopbackServer):
    """Answers every request with `status` and a Location on `target` (same path, a query that must never be shown)."""

    def __init__(self, status: int, target: str) -> None:
        self.status, self.target, self.requests = status, target, 0
        self._server = WSGIServer(("127.0.0.1", 0), self._app, log=None, error_log=None)

    def _app(self, environ: dict, start_response) -> list[bytes]:
        self.requests += 1
        length = int(environ.get("CONTENT_LENGTH") or 0)
        environ["wsgi.input"].read(length)
        location = f"{self.target}{environ['PATH_INFO']}?{QUERY_SECRET}"
        start_response(f"{self.status} Redirect", [("Location", location), ("Content-Length", "0")])
        return [b""]


@pytest.mark.parametrize(
    ("status", "client", "model"),
    [
        (307, "fast", True),
        (302, "fast", True),
        (307, "openai-sdk", True),
        (308, "openai-sdk", True),
        (307, "fast", False),
    ],
    ids=["307-fast", "302-fast", "307-sdk", "308-sdk", "307-model-lookup"],
)
def test_a_redirect_is_a_failure_and_nothing_reaches_its_target(tmp_path, status, client, model):
    with RecordingServer() as target, Redirector(status, target.url) as redirector:
        proc = run_locust(
            LOCUSTFILE, "-u", "2", "-r", "2", "-t", "20s", "--host", redirector.url, "--client", client,
            "--max-tokens", "8", "--results-dir", str(tmp_path), *(("--model", "m") if model else ()),
            env={**os.environ, "OPENAI_API_KEY": KEY}, timeout_s=60,
        )  # fmt: skip
        assert redirector.requests >= 1
        assert target.requests == []  # not one request followed the Location
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-3000:]
    assert "Verdict: PASSED" not in output
    assert QUERY_SECRET not in output and KEY not in output
    shown = f"HTTP {status} redirect to {target.url}/v1/"
    assert shown in output, output[-3000:]
    assert "point --host at the final URL" in output
    if model:
        summary = read_summary(tmp_path)
        assert summary["failures"] == {ErrorKind.REDIRECT.value: summary["throughput"]["requests_failed"]}
        assert summary["throughput"]["requests_ok"] == 0 and summary["verdict"]["passed"] is False
        assert summary["throughput"]["requests_failed"] <= 10  # the run ended at once: no later request can pass
        assert QUERY_SECRET not in (tmp_path / "summary.json").read_text()
    else:  # the lookup: one line naming the Location, exit 2
        assert proc.returncode == 2 and "/v1/models answered" in output
