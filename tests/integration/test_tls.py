"""HTTPS: certificates and host names verified by default in both clients, trusted through
--ca-bundle or the standard variables, skipped with --insecure; a rejected certificate is one line,
exit code 2, and nothing is sent; the simulator over TLS; HTTP proxies from the environment.

Every certificate is made here by a throw-away CA (trustme). The variables that choose a trust
store or a proxy are set by each test (this machine may set some of them)."""

from __future__ import annotations

import contextlib
import http.client
import logging
import os
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import LOCUSTFILE, options, read_summary, run_local, run_locust
from gevent.server import StreamServer
from harness.output import error_lines
from harness.proxy_server import RecordingProxy
from harness.sim_requests import assert_t_recv_is_the_kernel_arrival

from llm_locust.load.limits import CONFIGURATION_KINDS
from llm_locust.metrics.record import ErrorKind
from llm_locust.sim import SimProcess, run_sim

SIM_ARGS = ("--ttft-ms", "10", "--itl-ms", "2", "--output-tokens", "8")
TRUST_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE")
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
KEY = "sk-tls-SECRET-9f8e7d6c"


@contextlib.contextmanager
def tls_sim(pki: Path, name: str) -> Iterator[SimProcess]:
    """The simulator serving HTTPS with the certificate `name` of `pki`."""
    with run_sim(*SIM_ARGS, "--tls-cert", str(pki / f"{name}.crt"), "--tls-key", str(pki / f"{name}.key")) as sim:
        yield sim


@pytest.fixture(scope="module")
def good_sim(pki: Path) -> Iterator[SimProcess]:
    with tls_sim(pki, "good") as sim:
        yield sim


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No trust-store or proxy variable from the machine (upper or lower case)."""
    for name in (*TRUST_VARIABLES, *PROXY_VARIABLES):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


def subprocess_env(**extra: str) -> dict[str, str]:
    """This process's environment without trust-store or proxy variables, plus `extra`."""
    dropped = {n for name in (*TRUST_VARIABLES, *PROXY_VARIABLES) for n in (name, name.lower())}
    return {**{k: v for k, v in os.environ.items() if k not in dropped}, "OPENAI_API_KEY": KEY, **extra}


def local_run(tmp_path: Path, host: str, *extra: str) -> dict:
    """An in-process run of 2 users against `host` until 4 requests finished (--max-requests) or the run stopped
    itself (a refused certificate); its summary.json. It ends on the count, not on a clock: a loaded machine's slow
    handshakes make it longer, never shorter of requests (the 30 s are only how long to wait for them)."""
    opts = options("--host", host, "--model", "llm-locust-sim", "--max-tokens", "8", "--max-requests", "4",
                   "--results-dir", str(tmp_path), *extra)  # fmt: skip
    run_local(opts, users=2, seconds=30, until_stopped=True)
    return read_summary(tmp_path)


# -- verified ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("trust", "client"),
    [("--ca-bundle", "fast"), ("--ca-bundle", "openai-sdk"), ("SSL_CERT_FILE", "fast"), ("SSL_CERT_FILE", "openai-sdk"),
     ("REQUESTS_CA_BUNDLE", "fast"), ("SSL_CERT_DIR", "fast")],
)  # fmt: skip
def test_verified_connection_with_the_test_ca(tmp_path, pki, good_sim, clean_env, trust, client):
    extra = ["--client", client]
    if trust == "--ca-bundle":
        extra += ["--ca-bundle", str(pki / "ca.pem")]
    elif trust == "SSL_CERT_DIR":  # a folder of CA files named by their subject hash, as c_rehash makes it
        subject_hash = subprocess.run(["openssl", "x509", "-hash", "-noout", "-in", str(pki / "ca.pem")],
                                      capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
        (tmp_path / "certs").mkdir()
        (tmp_path / "certs" / f"{subject_hash}.0").write_bytes((pki / "ca.pem").read_bytes())
        clean_env.setenv(trust, str(tmp_path / "certs"))
    else:
        clean_env.setenv(trust, str(pki / "ca.pem"))
    summary = local_run(tmp_path, good_sim.url, *extra)
    assert summary["failures"] == {} and summary["throughput"]["requests_ok"] >= 2
    settings = summary["settings"]
    assert settings["insecure"] is False and settings["ca_bundle"] == (extra[-1] if trust == "--ca-bundle" else "")


# -- rejected: one line, exit code 2, nothing sent -------------------------------------------------------------------
REJECTED_RUN_S = 30
"""The run time a rejected run asks for: it must stop itself within half of it."""
UNKNOWN_ISSUER = "unable to get local issuer certificate (unknown issuer"


@pytest.mark.parametrize(
    ("cert", "client", "extra", "reason"),
    [
        ("unknown_issuer", "fast", ["--model", "llm-locust-sim"], UNKNOWN_ISSUER),
        ("unknown_issuer", "openai-sdk", ["--model", "llm-locust-sim"], UNKNOWN_ISSUER),
        ("unknown_issuer", "fast", [], UNKNOWN_ISSUER),  # the /v1/models lookup meets it first
        ("unknown_issuer", "fast", ["--model", "llm-locust-sim", "--processes", "2"], UNKNOWN_ISSUER),
        ("other_name", "fast", ["--model", "llm-locust-sim"],
         "IP address mismatch, certificate is not valid for '127.0.0.1' (wrong host name"),
        ("other_name", "openai-sdk", ["--model", "llm-locust-sim"], "IP address mismatch"),
        ("expired", "fast", ["--model", "llm-locust-sim"], "certificate has expired (outside its validity dates"),
    ],
)  # fmt: skip
def test_rejected_certificate_is_one_line_and_exit_code_2(tmp_path, pki, cert, client, extra, reason):
    """Through the `locust` CLI (local, or a master with 2 worker processes), the CA trusted with
    --ca-bundle: the run stops itself early (within seconds of its `REJECTED_RUN_S` of load; without --model, the
    model lookup fails before any load), and the simulator received no request. The load's own duration is tested
    (`run.duration_s`), not the command's wall time: a loaded machine stretches the processes' start-up to tens of
    seconds (the 150 s timeout is only how long to wait for them)."""
    model = "--model" in extra
    with tls_sim(pki, cert) as sim:
        args = ["-u", "2", "-r", "2", "-t", f"{REJECTED_RUN_S}s", "--host", sim.url, "--ca-bundle", str(pki / "ca.pem"),
                "--client", client, "--max-tokens", "8", "--results-dir", str(tmp_path), *extra]  # fmt: skip
        proc = run_locust(LOCUSTFILE, *args, env=subprocess_env(), timeout_s=150)
        assert sim.trace() == []  # not one request reached the server's HTTP layer
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output[-3000:]
    assert "Traceback" not in output
    (line,) = error_lines(output)
    assert f"TLS certificate of 127.0.0.1:{sim.port} rejected: {reason}" in line, line
    if model:
        summary = read_summary(tmp_path)
        assert summary["failures"].get("tls", 0) >= 1 and set(summary["failures"]) == {"tls"}
        assert summary["throughput"]["requests_ok"] == 0
        assert summary["run"]["stop_reason"] == CONFIGURATION_KINDS[ErrorKind.TLS], summary["run"]
        assert summary["run"]["duration_s"] < REJECTED_RUN_S / 2, f"the run was not ended early: {summary['run']}"
    assert KEY not in output


@pytest.mark.parametrize("client", ["fast", "openai-sdk"])
def test_no_byte_of_a_request_reaches_an_unverified_server(tmp_path, pki, clean_env, client):
    """A raw TLS listener with a certificate of an unknown CA: handshakes come, no application byte."""
    attempts, received = [], []

    def record(sock, _address):
        attempts.append(1)
        with contextlib.suppress(OSError):  # the client aborts the handshake: ssl.SSLError
            tls = context.wrap_socket(sock, server_side=True)
            while data := tls.recv(65536):
                received.append(data)

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki / "unknown_issuer.crt", pki / "unknown_issuer.key")
    server = StreamServer(("127.0.0.1", 0), record)
    server.start()
    try:
        clean_env.setenv("OPENAI_API_KEY", KEY)
        summary = local_run(tmp_path, f"https://127.0.0.1:{server.server_port}", "--client", client)
    finally:
        server.stop(timeout=0)
    assert attempts and received == []
    assert summary["failures"].get("tls", 0) >= 1 and summary["throughput"]["requests_ok"] == 0


# -- --insecure -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("client", ["fast", "openai-sdk"])
def test_insecure_skips_verification_warns_once_and_is_recorded(tmp_path, pki, client):
    with tls_sim(pki, "unknown_issuer") as sim:
        proc = run_locust(LOCUSTFILE, "-u", "2", "-r", "2", "-t", "60s", "--max-requests", "4", "--host", sim.url,
                          "--insecure", "--client", client, "--max-tokens", "8", "--results-dir", str(tmp_path),
                          env=subprocess_env())  # fmt: skip
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert output.count("--insecure: TLS certificates and host names are not verified") == 1
    summary = read_summary(tmp_path)
    assert summary["settings"]["insecure"] is True
    assert summary["failures"] == {} and summary["throughput"]["requests_ok"] == 4


# -- unusable trust stores -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["missing", "not_pem", "directory", "env_missing"])
def test_unusable_ca_file_is_one_line_and_exit_code_2(tmp_path, case):
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("just text\n")
    path, source, message = {
        "missing": (tmp_path / "nope.pem", "--ca-bundle", "no such file"),
        "not_pem": (not_pem, "--ca-bundle", "no PEM certificate in it"),
        "directory": (tmp_path, "--ca-bundle", "a directory"),
        "env_missing": (tmp_path / "nope.pem", "SSL_CERT_FILE", "no such file"),
    }[case]
    args = ["--ca-bundle", str(path)] if source == "--ca-bundle" else []
    env = subprocess_env(**({source: str(path)} if source != "--ca-bundle" else {}))
    proc = run_locust(LOCUSTFILE, "-t", "2s", "--host", "https://127.0.0.1:9", *args, env=env, timeout_s=60)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output[-3000:]
    assert "Traceback" not in output
    (line,) = [line for line in output.splitlines() if "ERROR" in line]
    assert f"{source} {path}: {message}" in line


# -- the simulator over TLS --------------------------------------------------------------------------------------------
def https_connection(sim: SimProcess, pki: Path) -> http.client.HTTPSConnection:
    context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    return http.client.HTTPSConnection("127.0.0.1", sim.port, timeout=10, context=context)


def test_sim_over_tls_keeps_kernel_receive_times(pki, good_sim):
    """As in test_sim's plain-TCP test: a request sent while the simulator is stopped (SIGSTOP) has
    the kernel's arrival time as its t_recv (asyncio reads TLS records with `recv_into`)."""
    conn = https_connection(good_sim, pki)
    conn.connect()  # the TLS handshake needs the simulator running
    assert_t_recv_is_the_kernel_arrival(good_sim, conn)


@pytest.mark.parametrize(("args", "message"), [
    (["--tls-cert", "x.crt"], "--tls-cert and --tls-key go together"),
    (["--tls-cert", "nope.crt", "--tls-key", "nope.key"], "no such file"),
])  # fmt: skip
def test_sim_tls_options_are_checked(tmp_path, args, message):
    proc = subprocess.run([sys.executable, "-m", "llm_locust.cli", "sim", "--port", "0", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=30)  # fmt: skip
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


# -- proxies ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("client", ["fast", "openai-sdk"])
def test_https_through_a_connect_proxy_still_verifies(tmp_path, pki, good_sim, clean_env, caplog, client):
    """HTTPS_PROXY with credentials: a CONNECT tunnel (its Proxy-Authorization on the CONNECT), the
    certificate checked end to end, the proxy password in no output."""
    caplog.set_level(logging.INFO, logger="llm_locust")
    with RecordingProxy() as proxy:
        clean_env.setenv("HTTPS_PROXY", proxy.url.replace("http://", "http://me:proxy-SECRET-pw@"))
        summary = local_run(tmp_path, good_sim.url, "--client", client, "--ca-bundle", str(pki / "ca.pem"))
    if client == "fast":  # (httpx picks the openai SDK's proxy itself)
        assert f"connecting through the proxy HTTPS_PROXY={proxy.url}" in caplog.text
    assert "proxy-SECRET-pw" not in caplog.text
    assert summary["failures"] == {} and summary["throughput"]["requests_ok"] >= 2
    lines = {line for line, _headers in proxy.requests}
    assert lines == {f"CONNECT 127.0.0.1:{good_sim.port} HTTP/1.1"}
    assert all(headers.get("proxy-authorization") == "Basic bWU6cHJveHktU0VDUkVULXB3" for _, headers in proxy.requests)
    assert "proxy-SECRET-pw" not in (tmp_path / "summary.json").read_text()


def test_a_refused_tunnel_is_a_connect_failure(tmp_path, pki, good_sim, clean_env):
    """A proxy answering CONNECT with 407: counted as `connect`, naming the proxy; no task exception
    (geventhttpclient raises a bare RuntimeError there)."""
    with RecordingProxy(refuse=b"HTTP/1.1 407 Proxy Authentication Required") as proxy:
        clean_env.setenv("HTTPS_PROXY", proxy.url)
        opts = options("--host", good_sim.url, "--model", "llm-locust-sim", "--ca-bundle", str(pki / "ca.pem"),
                       "--results-dir", str(tmp_path))  # fmt: skip
        env = run_local(opts, users=1, seconds=1.0)
    summary = read_summary(tmp_path)
    assert set(summary["failures"]) == {"connect"} and summary["throughput"]["requests_ok"] == 0
    port = proxy.url.rpartition(":")[2]
    assert f"ProxyError: proxy 127.0.0.1:{port}: Proxy CONNECT failed: HTTP/1.1 407" in summary["diagnosis"]
    assert env.runner.exceptions == {}


@pytest.mark.parametrize("client", ["fast", "openai-sdk"])
def test_http_through_a_forward_proxy(tmp_path, fast_sim, clean_env, client):
    with RecordingProxy() as proxy:
        clean_env.setenv("HTTP_PROXY", proxy.url)
        summary = local_run(tmp_path, fast_sim.url, "--client", client)
    assert summary["failures"] == {} and summary["throughput"]["requests_ok"] >= 2
    assert {line for line, _ in proxy.requests} == {f"POST {fast_sim.url}/v1/chat/completions HTTP/1.1"}


@pytest.mark.parametrize("client", ["fast", "openai-sdk"])
def test_no_proxy_hosts_are_reached_directly(tmp_path, fast_sim, clean_env, client):
    with RecordingProxy() as proxy:
        clean_env.setenv("HTTP_PROXY", proxy.url)
        clean_env.setenv("NO_PROXY", "localhost,127.0.0.1")
        summary = local_run(tmp_path, fast_sim.url, "--client", client)
    assert summary["failures"] == {} and summary["throughput"]["requests_ok"] >= 2
    assert proxy.requests == []


def test_a_proxy_the_fast_client_cannot_use_is_one_line(tmp_path):
    env = subprocess_env(HTTPS_PROXY="socks5://me:sock-SECRET@127.0.0.1:1080")
    proc = run_locust(LOCUSTFILE, "-t", "2s", "--host", "https://127.0.0.1:9", env=env, timeout_s=60)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output[-3000:]
    (line,) = error_lines(output)
    assert "HTTPS_PROXY=socks5://127.0.0.1:1080: the fast client speaks to http:// proxies only" in line
    assert "sock-SECRET" not in output and "Traceback" not in output
