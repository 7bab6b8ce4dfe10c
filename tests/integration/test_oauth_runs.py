"""Short-lived bearer tokens against the simulator's token endpoints and verifier (`--require-token`): Azure OpenAI
with Entra ID (azure-identity, over HTTPS with the discovery document msal reads), Databricks OAuth M2M, Vertex AI
with Google's application-default credentials (a service-account key file whose signature the simulator checks) —
master + 2 workers, every worker fetching and refreshing its own token; a wrong secret refused before any load; and
the refreshing greenlet against a token endpoint in this process that answers slowly, or refuses every second time."""

from __future__ import annotations

import json
import ssl
import time
import urllib.request
from pathlib import Path

import gevent
import pytest
from conftest import LOCUSTFILE, options, quit_master, read_summary, run_locust, start_master_and_workers
from harness.sse_server import read_request, serve

from llm_locust.runtime.plugin import run_state
from llm_locust.runtime.token_keeper import TokenKeeper
from llm_locust.sim import run_sim
from llm_locust.transport.tokens import token_source

CLIENT_ID, CLIENT_SECRET = "llm-locust-test-client", "planted-client-secret-7f3a9c"
TENANT = "0b1c2d3e-tenant"


def service_account_key(folder: Path, token_uri: str) -> Path:
    """A Google service-account key file (a fresh RSA key) whose token_uri is the simulator's."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()  # fmt: skip
    path = folder / "service-account.json"
    path.write_text(json.dumps({
        "type": "service_account", "project_id": "proj-1", "private_key_id": "key-1", "private_key": pem,
        "client_email": "loadtest@proj-1.iam.gserviceaccount.com", "client_id": "1", "token_uri": token_uri,
    }))  # fmt: skip
    return path


def cloud(provider: str, folder: Path, pki: Path, secret: str = CLIENT_SECRET) -> tuple[list[str], list[str], dict]:
    """(simulator arguments, llm-locust arguments, environment) of `provider`'s OAuth flow; the simulator's URL goes
    where "{url}" stands."""
    sim = ["--require-token", "--oauth-client", f"{CLIENT_ID}:{CLIENT_SECRET}"]
    if provider == "azure":
        sim += ["--tls-cert", str(pki / "good.crt"), "--tls-key", str(pki / "good.key")]
        env = {"AZURE_TENANT_ID": TENANT, "AZURE_CLIENT_ID": CLIENT_ID, "AZURE_CLIENT_SECRET": secret,
               "AZURE_AUTHORITY_HOST": "{url}", "REQUESTS_CA_BUNDLE": str(pki / "ca.pem")}  # fmt: skip
        return sim, ["--provider", "azure", "--deployment", "gpt4o", "--ca-bundle", str(pki / "ca.pem")], env
    if provider == "databricks":
        env = {"DATABRICKS_CLIENT_ID": CLIENT_ID, "DATABRICKS_CLIENT_SECRET": secret}
        return sim, ["--provider", "databricks", "--deployment", "llama-70b"], env
    key = service_account_key(folder, "{url}/token")
    sim += ["--google-key-file", str(key)]
    if secret != CLIENT_SECRET:  # the client signs with another key than the one the simulator knows
        (folder / "other").mkdir()
        key = service_account_key(folder / "other", "{url}/token")
    env = {"GOOGLE_APPLICATION_CREDENTIALS": str(key)}
    return sim, ["--provider", "vertex", "--vertex-project", "proj-1", "--vertex-location", "us-central1"], env


def sim_tokens(url: str, pki: Path) -> dict:
    """GET /sim/tokens of the simulator at `url`."""
    context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    with urllib.request.urlopen(url + "/sim/tokens", timeout=10, context=context) as resp:
        return json.loads(resp.read())


def with_url(env: dict, url: str, folder: Path) -> dict:
    """`env` with the simulator's `url` in place of "{url}" (a key file's token_uri too)."""
    for name, value in env.items():
        if name == "GOOGLE_APPLICATION_CREDENTIALS":
            Path(value).write_text(Path(value).read_text().replace("{url}", url))
    return {name: value.replace("{url}", url) for name, value in env.items()}


@pytest.mark.alone  # token refreshes counted exactly in every worker
@pytest.mark.parametrize("provider", ["azure", "databricks", "vertex"])
def test_tokens_refreshed_in_every_worker_none_refused(provider, tmp_path, pki, monkeypatch):
    sim_args, args, env = cloud(provider, tmp_path, pki)
    with run_sim("--ttft-ms", "20", "--itl-ms", "5", "--output-tokens", "16", "--token-lifetime-s", "2",
                 *sim_args) as sim:  # fmt: skip
        for name, value in with_url(env, sim.url, tmp_path).items():
            monkeypatch.setenv(name, value)
        opts = options("--host", sim.url, "--model", "llm-locust-sim", "--max-tokens", "16", "--results-dir",
                       str(tmp_path / "results"), "--interval-s", "1", *args)  # fmt: skip
        master_env, master, workers = start_master_and_workers(opts)
        master.start(4, spawn_rate=4)
        gevent.sleep(8)  # ~7 refreshes in each worker (a token every 1 s), each worker's requests on 7 tokens
        keepers = [run_state(worker.environment).users.tokens for worker in workers]
        quit_master(master_env)
        for keeper in keepers:
            keeper.stop()
        counts = sim_tokens(sim.url, pki)
    summary = read_summary(tmp_path / "results")
    sent = summary["throughput"]["requests_ok"]
    refreshes = [keeper.refreshes for keeper in keepers]
    print(f"{provider}: refreshes per worker {refreshes}, sim {counts}, requests ok {sent}")
    assert summary["failures"] == {} and sent > 20
    assert all(n >= 4 for n in refreshes), refreshes  # a 2 s token, refreshed after 1 s, over 8 s
    assert all(keeper.refresh_failures == 0 for keeper in keepers)
    flow = {"azure": "entra", "databricks": "databricks", "vertex": "google"}[provider]
    assert counts["issued"][flow] == 2 + sum(refreshes) and counts["token_refused"] == 0
    cut = summary["unfinished"]["requests"]  # sent, cut by the run's end: the simulator verified them too
    assert counts["refused"] == 0 and counts["verified"] == sent + cut
    reported = summary["auth"]["refreshes_by_worker"]  # as of each worker's last report
    assert summary["auth"]["flow"] == {"vertex": "google", "azure": "entra"}.get(provider, "databricks-m2m")
    assert len(reported) == 2 and all(4 <= n <= max(refreshes) for n in reported.values()), reported


@pytest.mark.parametrize("provider", ["azure", "databricks", "vertex"])
def test_a_wrong_secret_exits_2_in_one_line_before_any_load(provider, tmp_path, pki):
    sim_args, args, env = cloud(provider, tmp_path, pki, secret="wrong-secret-e81d")
    with run_sim("--token-lifetime-s", "3", *sim_args) as sim:
        run_env = {**__import__("os").environ, **with_url(env, sim.url, tmp_path)}
        proc = run_locust(LOCUSTFILE, "-u", "2", "-r", "2", "--run-time", "3s", "--host", sim.url, "--model", "m",
                          "--results-dir", str(tmp_path / "results"), *args, env=run_env, timeout_s=60)  # fmt: skip
        counts = sim_tokens(sim.url, pki)
    errors = [line for line in proc.stderr.splitlines() if "ERROR" in line]
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(errors) == 1, errors
    assert {"azure": "AZURE_CLIENT_SECRET", "databricks": "DATABRICKS_CLIENT_SECRET",
            "vertex": "GOOGLE_APPLICATION_CREDENTIALS"}[provider] in errors[0]  # fmt: skip
    assert "wrong-secret-e81d" not in proc.stdout + proc.stderr
    assert counts["verified"] == counts["refused"] == 0 and sum(counts["issued"].values()) == 0


class TokenEndpoint:
    """A Databricks-like token endpoint in this process (`url`): each answer after `delay_s`, every `fail_every`-th
    request (0: none) refused with HTTP 500, tokens living `lifetime_s`; `issued` maps each token to when it expires
    (time.perf_counter); `received`: the requests read (answered or not yet)."""

    def __init__(self, delay_s: float, lifetime_s: float, fail_every: int = 0) -> None:
        self.delay_s, self.lifetime_s, self.fail_every = delay_s, lifetime_s, fail_every
        self.requests = self.received = 0
        self.issued: dict[str, float] = {}
        self.server = serve(self._answer)
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def _answer(self, sock, _address) -> None:
        while read_request(sock):
            self.received += 1
            gevent.sleep(self.delay_s)
            self.requests += 1
            if self.fail_every and self.requests % self.fail_every == 0:
                sock.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")
                continue
            token = f"token-{self.requests}"
            self.issued[token] = time.perf_counter() + self.lifetime_s
            body = json.dumps({"access_token": token, "expires_in": self.lifetime_s}).encode()
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                         % (len(body), body))  # fmt: skip


def keep_tokens(endpoint: TokenEndpoint, seconds: float, monkeypatch) -> tuple[TokenKeeper, list[float], list[float]]:
    """A `TokenKeeper` of `endpoint`'s tokens for `seconds`, a greenlet ticking every 10 ms meanwhile: (the keeper,
    the gaps between ticks, how long the token in use at each tick had still to live), seconds."""
    monkeypatch.setenv("DATABRICKS_CLIENT_ID", CLIENT_ID)
    monkeypatch.setenv("DATABRICKS_CLIENT_SECRET", CLIENT_SECRET)
    keeper = TokenKeeper("databricks-m2m", token_source("databricks-m2m", endpoint.url, True))
    gaps_s: list[float] = []
    left_s: list[float] = []

    def tick() -> None:
        last = time.perf_counter()
        while True:
            gevent.sleep(0.01)
            now = time.perf_counter()
            gaps_s.append(now - last)
            last = now
            if keeper.auth.token:
                token = keeper.auth.headers("POST", "", b"")["Authorization"].removeprefix("Bearer ")
                left_s.append(endpoint.issued[token] - now)

    ticker = gevent.spawn(tick)
    try:
        keeper.start()  # the first token: the ticker runs meanwhile
        gevent.sleep(seconds)
    finally:
        keeper.stop()
        ticker.kill()
        endpoint.server.stop()
    return keeper, gaps_s, left_s


def test_a_slow_token_endpoint_blocks_neither_the_hub_nor_the_requests(monkeypatch):
    """The token library's HTTP (requests over urllib3) yields to gevent's hub: a token endpoint answering after
    0.4 s, in this very process, is waited for by the refreshing greenlet alone — a greenlet ticking every 10 ms
    meanwhile never waits long — and the token in use is replaced before it expires."""
    endpoint = TokenEndpoint(delay_s=0.4, lifetime_s=1.0)
    keeper, gaps_s, left_s = keep_tokens(endpoint, 3.0, monkeypatch)
    assert keeper.refreshes >= 2 and keeper.refresh_failures == 0
    assert max(gaps_s) < 0.2, max(gaps_s)  # 0.4 s waits for the endpoint never held the hub
    assert min(left_s) > 0, min(left_s)


def test_a_failed_refresh_keeps_the_token_and_retries_before_it_expires(monkeypatch):
    """Every second token request refused: the keeper keeps the token in use, tries again within half its remaining
    life, and no tick ever sees an expired token."""
    endpoint = TokenEndpoint(delay_s=0.0, lifetime_s=2.0, fail_every=2)
    keeper, _, left_s = keep_tokens(endpoint, 5.0, monkeypatch)
    assert keeper.refresh_failures >= 2 and keeper.refreshes >= 2, (keeper.refreshes, keeper.refresh_failures)
    assert min(left_s) > 0, min(left_s)


def test_a_refresh_under_way_at_the_stop_ends_and_is_counted(monkeypatch):
    """Tokens living 1 s, refreshed 0.5 s after each arrives, the endpoint answering in 0.4 s: the second refresh is
    under way from ~1.8 s to ~2.2 s, and the keeper is stopped at ~2.0 s. The stop waits for it: every token request
    the endpoint received is the first token's or a counted refresh (a refresh killed mid-way was fetched for nothing
    and counted nowhere: the simulator's issued tokens then exceeded the workers' refreshes)."""
    endpoint = TokenEndpoint(delay_s=0.4, lifetime_s=1.0)
    keeper, _, _ = keep_tokens(endpoint, 1.6, monkeypatch)
    assert keeper.refreshes >= 1 and endpoint.received == endpoint.requests == 1 + keeper.refreshes
