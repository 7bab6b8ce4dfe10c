"""Secrets planted everywhere a user puts them — API key, two --header values, URL credentials —, each with
`'&<>"%` and a space inside, and a server that echoes every request header in its errors (JSON error bodies, an
HTML 502 page, an error event mid-stream): not one of them, nor a piece of one, in any output, as it is or in any
escaped form (`harness.output.secret_forms`: JSON, HTML, percent-encoding ...).

A scenario's per-call `headers=` value too (`test_planted_call_header_through_master_and_workers`).

Through the real `locust` CLI with a master and 2 worker processes (console, log file, Locust's CSVs and
HTML report, the results folder, `llm-locust report`), and through the web UI (its pages and JSON,
the files and report it serves), whose form is re-submitted as a browser would: secret fields empty,
the host as the page shows it (redacted). And an AWS secret access key and session token, planted in the
environment of `--provider bedrock`'s master and workers, which sign every request with them.
"""

from __future__ import annotations

import base64
import csv
import json
import os
import re
import secrets
import string
import subprocess
import sys
from urllib.parse import quote

import pytest
from conftest import LOCUSTFILE as LOCUSTFILE_PATH
from conftest import ROOT, master_port_args, read_summary, wait_for
from harness.output import assert_no_secret, leaks
from harness.proxy_server import RecordingProxy
from harness.web_ui import http, locust_web_ui, post, post_json, wait_for_page

from llm_locust.redact import REDACTED
from llm_locust.sim import run_sim

SPECIAL = "'&<>\"% "
"""In every planted password: what JSON, HTML and URLs escape (`\\u0027`, `&amp;`, `%3C`, `+` for the space ...)."""


def password() -> str:
    """A random secret with `SPECIAL` inside: any 12 of its characters hold 5 or more random ones."""
    return f"{secrets.token_hex(6)}{SPECIAL}{secrets.token_hex(6)}"


KEY = f"sk-{password()}"
GATEWAY_TOKEN = password()
TEAM_TOKEN = password()
URL_USER = f"u{secrets.token_hex(8)}"
URL_PASSWORD = password()
URL_PASSWORD_WRITTEN = quote(URL_PASSWORD, safe="!$&'()*+,;=")
"""As written in a URL: `'` and `&` as they are (RFC 3986 allows them in the user-info), `<>"%` and the space
percent-encoded."""
BASIC = base64.b64encode(f"{URL_USER}:{URL_PASSWORD}".encode()).decode()
"""What Locust sends for the URL's credentials (`Authorization: Basic`)."""
ALL = (KEY, GATEWAY_TOKEN, TEAM_TOKEN, URL_USER, URL_PASSWORD, BASIC)
HEADERS = ("--header", f"A-Gw: {GATEWAY_TOKEN}", "--header", f"A-Tm: {TEAM_TOKEN}")
"""Named to sort first: the simulator echoes headers by name, so these come before the 200-character
cut of a failure message, and the Basic credentials after them are cut in two by it."""
SIM_ARGS = ("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "8", "--echo-headers", "--fault-seed", "3",
            "--fault", "http_500=0.15", "--fault", "html_502=0.15", "--fault", "stream_error=0.15")  # fmt: skip
ECHOED_KINDS = {"http_5xx", "stream_error"}

LOCUSTFILE = '''
from locust import events, task

from llm_locust.runtime.plugin import install
from llm_locust.runtime.users import ChatCompletionsUser

install(events)


class ChatUser(ChatCompletionsUser):
    """The chat user, whose first task raises an exception quoting a header value (once per user)."""

    raised = False

    @task
    def complete(self):
        if not self.raised:
            self.raised = True
            raise RuntimeError("a task failed, quoting " + dict(self.llm.settings.endpoint.header)["A-Tm"])
        super().complete()
'''


def with_credentials(url: str) -> str:
    return url.replace("http://", f"http://{URL_USER}:{URL_PASSWORD_WRITTEN}@")


def run_distributed(
    locustfile: object, host: str, results: object, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """The `locust` CLI with a master and 2 worker processes (4 users, 4 s, 8 tokens, DEBUG logs) against `host`,
    writing the results folder `results` and Locust's CSVs and HTML report into it; `args` added."""
    command = [
        sys.executable, "-m", "locust", "-f", str(locustfile), "--headless", "--processes", "2", "-u", "4", "-r", "4",
        "--run-time", "4s", "--host", host, "--model", "llm-locust-sim", "--max-tokens", "8",
        "--results-dir", str(results), "--csv", f"{results}/locust", "--csv-full-history",
        "--html", f"{results}/locust_report.html", "--loglevel", "DEBUG", *master_port_args(), *args,
    ]  # fmt: skip
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=90)


def with_report(run: subprocess.CompletedProcess, results: object) -> str:
    """Every output of `run` and of `llm-locust report` on its `results` (which must succeed), joined."""
    report = subprocess.run([sys.executable, "-m", "llm_locust.cli", "report", str(results), "-o",
                             f"{results}/report.html", "--no-png"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    output = run.stdout + run.stderr + report.stdout + report.stderr
    assert report.returncode == 0, output[-3000:]
    return output


def test_planted_secrets_through_master_and_workers(tmp_path):
    """--api-key, two --header, credentials in --host and --metrics-url; a master with 2 worker processes.

    Locust sends the host's credentials as `Authorization: Basic` in place of the key's Bearer header:
    the echoes hold the headers and the Basic value (the key's echo: the web UI test)."""
    locustfile = tmp_path / "leaky.py"
    locustfile.write_text(LOCUSTFILE)
    results = tmp_path / "results"
    with run_sim(*SIM_ARGS) as sim:
        run = run_distributed(locustfile, with_credentials(sim.url), results, "--ignore-eos", "--api-key", KEY,
                              *HEADERS, "--metrics-url", with_credentials(sim.url) + "/metrics",
                              "--metrics-interval-s", "0.5")  # fmt: skip
    output = with_report(run, results)

    summary = read_summary(results)
    assert summary["run"]["workers_max"] == 2 and summary["throughput"]["requests_ok"] > 0, output[-3000:]
    assert set(summary["failures"]) >= ECHOED_KINDS, summary["failures"]
    with (results / "locust_failures.csv").open() as f:  # the echoes reached Locust's failures, redacted
        failures = " ".join(row["Error"] for row in csv.DictReader(f))
    assert "simulated gateway failure" in failures and "simulated engine failure" in failures
    for header in ("a-gw", "a-tm", "authorization: Basic"):
        assert f"{header}: {REDACTED}" in failures or f"{header} {REDACTED}" in failures, header
    with (results / "locust_exceptions.csv").open() as f:  # each worker's users raised, quoting a header
        assert f"quoting {REDACTED}" in f.read()
    assert "/metrics" in json.dumps(summary["server"]) and summary["server"]["urls"][0]["scrapes_ok"] > 0
    assert_no_secret(results, output, *ALL)


CALL_TOKEN = password()
SCENARIO = """
import os

from locust import events, task

from llm_locust.runtime.plugin import install
from llm_locust.runtime.users import LLMUser

install(events)


class CallHeaderUser(LLMUser):
    \"\"\"A scenario whose every call carries its own header (`headers=`), its value from the environment.\"\"\"

    @task
    def ask(self):
        self.llm.chat.completions.create(messages=[{"role": "user", "content": "Hi"}], max_tokens=8,
                                         headers={"A-Call": os.environ["CALL_TOKEN"]})
"""


def test_planted_call_header_through_master_and_workers(tmp_path):
    """A scenario's per-call `headers=` value, echoed by the simulator in its errors: redacted like a --header value
    in Locust's failures CSV and HTML report, the console and the results, through a master with 2 worker processes."""
    locustfile = tmp_path / "scenario.py"
    locustfile.write_text(SCENARIO)
    results = tmp_path / "results"
    with run_sim(*SIM_ARGS) as sim:
        run = run_distributed(locustfile, sim.url, results, env={**os.environ, "CALL_TOKEN": CALL_TOKEN})
    output = with_report(run, results)
    summary = read_summary(results)
    assert summary["run"]["workers_max"] == 2 and summary["throughput"]["requests_ok"] > 0, output[-3000:]
    assert set(summary["failures"]) >= ECHOED_KINDS, summary["failures"]
    with (results / "locust_failures.csv").open() as f:  # the echoes reached Locust's failures, redacted
        failures = " ".join(row["Error"] for row in csv.DictReader(f))
    assert f"a-call: {REDACTED}" in failures or f"a-call {REDACTED}" in failures, failures[:3000]
    assert_no_secret(results, output, CALL_TOKEN)


def test_planted_secrets_through_the_web_ui(tmp_path):
    """--api-key, two --header and credentials in --host; the form re-submitted as a browser does; the answers
    refusing a page of another origin and a user class edit through a proxy scanned too.

    --provider azure: the key travels in its own `api-key` header, next to the host's Basic credentials;
    the simulator answers a model it does not serve with HTTP 404, echoing them all."""
    with run_sim(*SIM_ARGS) as sim:
        host = with_credentials(sim.url)
        command = ["-f", str(ROOT / "locustfiles" / "chat.py"), "--host", host, "--model", "not-served",
                   "--api-key", KEY, "--provider", "azure", "--deployment", "d", *HEADERS,
                   "--results-dir", str(tmp_path)]  # fmt: skip
        pages: dict[str, str] = {}
        with locust_web_ui(*command) as web:
            ui = web.url
            pages["/"] = wait_for_page(ui, 30)
            assert f"{REDACTED}:{REDACTED}@127.0.0.1" in pages["/"]  # the host field, credentials hidden
            form = {"user_count": 4, "spawn_rate": 4, "host": sim.url.replace("http://", f"http://{REDACTED}:{REDACTED}@"),
                    "api_key": "", "header": "", "max_tokens": "8", "interval_s": "1"}  # fmt: skip
            with RecordingProxy() as proxy:  # refused: a page of another origin, a user class through a proxy
                port = int(proxy.url.rpartition(":")[2])
                edit = {"user_class_name": "ChatUser", "proxy_host": "127.0.0.1", "proxy_port": port}
                attacker = {"Origin": "http://127.0.0.1:5555", "Sec-Fetch-Site": "same-site"}
                cross_origin, edited = post(f"{ui}/swarm", form, attacker), post_json(f"{ui}/user", edit)
            pages |= {"refused /swarm": json.dumps(cross_origin[1]), "refused /user": edited[1].decode()}
            assert (cross_origin[0], edited[0]) == (403, 400) and proxy.requests == []
            pages["/swarm"] = http(f"{ui}/swarm", form).decode()
            assert json.loads(pages["/swarm"])["success"] is True

            def failures_echoed() -> bool:
                errors = json.loads(http(f"{ui}/stats/requests"))["errors"]
                return sum(e["occurrences"] for e in errors) >= 4  # every request fails: the run stops early

            wait_for(failures_echoed, 30, "failures")
            for path in ("/stats/requests", "/exceptions", "/llm", "/llm/stats.json", "/", "/stats/report"):
                pages[f"{path} (running)"] = http(ui + path).decode()  # the host in them, credentials included
            http(f"{ui}/stop", {})
            wait_for(lambda: (tmp_path / "summary.json").exists() and read_summary(tmp_path)["status"], 20, "summary")
            wait_for(lambda: read_summary(tmp_path).get("verdict"), 20, "the final summary")
            for path in ("/llm/stats.json", "/llm/results/summary.json", "/llm/results/llm_timeseries.csv",
                         "/llm/results/histograms.json", "/llm/report", "/stats/report", "/stats/requests/csv",
                         "/stats/failures/csv", "/exceptions/csv", "/", "/llm", "/stats/requests",
                         "/exceptions"):  # fmt: skip
                pages[path] = http(ui + path, timeout_s=120).decode()
        output = web.output
    summary = read_summary(tmp_path)
    assert summary["failures"] == {"http_4xx": summary["throughput"]["requests_failed"]}, output[-3000:]
    assert "The model `not-served` does not exist" in summary["diagnosis"]
    # the form's empty secret fields and redacted host meant "as given at start-up": all of them were sent
    errors = " ".join(e["error"] for e in json.loads(pages["/stats/requests (running)"])["errors"])
    for header in ("api-key:", "a-gw:", "a-tm:", "authorization: Basic"):
        assert f"{header} {REDACTED}" in errors, errors[:2000]
    assert summary["run"]["host"] == form["host"]
    for path, text in pages.items():
        assert not leaks(text, ALL), path
    assert not leaks(output, ALL)
    for name, path in (("report.html", "/llm/report"), ("locust_stats.csv", "/stats/requests/csv")):
        (tmp_path / name).write_text(pages[path])  # as downloaded
    assert_no_secret(tmp_path, output, *ALL)


GEMINI_KEY = f"AIza{password()}"


def test_planted_gemini_key_through_master_and_workers(tmp_path):
    """--provider gemini: the key from GEMINI_API_KEY, in each process's environment and sent as `x-goog-api-key`
    (the simulator refuses a request without it: every success proves it went), with failures of every kind whose
    echoes of the request headers are cut before it (it sorts last): in no output, at DEBUG level too."""
    results = tmp_path / "results"
    env = {k: v for k, v in os.environ.items() if k != "GOOGLE_API_KEY"}
    with run_sim(*SIM_ARGS, "--api-key", GEMINI_KEY) as sim:
        run = run_distributed(ROOT / "locustfiles" / "gemini.py", sim.url, results, "--provider", "gemini",
                              env={**env, "GEMINI_API_KEY": GEMINI_KEY})  # fmt: skip
    output = with_report(run, results)
    summary = read_summary(results)
    assert summary["run"]["workers_max"] == 2 and summary["throughput"]["requests_ok"] > 0, output[-3000:]
    assert set(summary["failures"]) >= {"http_5xx", "overloaded"}, summary["failures"]  # Gemini's UNAVAILABLE
    assert_no_secret(results, output, GEMINI_KEY)


@pytest.mark.alone  # token refreshes counted exactly through master and workers
def test_planted_oauth_secrets_through_master_and_workers(tmp_path):
    """Databricks OAuth M2M through a master with 2 worker processes, each fetching and refreshing its own token (a
    1 s lifetime) from the simulator, which echoes every request header in its errors: the client secret, the other
    flows' secrets in the environment (Entra's client secret, a service account's private key) and every bearer token
    issued — unknown in advance: each `Bearer` written anywhere is followed by the redaction mark."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    client_secret, azure_secret = password(), password()
    pem = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        .decode()
    )
    key_file = tmp_path / "service-account.json"
    key_file.write_text(json.dumps({"type": "service_account", "private_key": pem, "client_email": "a@b",
                                    "token_uri": "http://127.0.0.1:9/token"}))  # fmt: skip
    key_lines = tuple(line for line in pem.splitlines() if not line.startswith("-----"))
    results = tmp_path / "results"
    env = {**os.environ, "DATABRICKS_CLIENT_ID": "sp-1", "DATABRICKS_CLIENT_SECRET": client_secret,
           "AZURE_CLIENT_SECRET": azure_secret, "GOOGLE_APPLICATION_CREDENTIALS": str(key_file)}  # fmt: skip
    with run_sim(*SIM_ARGS, "--require-token", "--token-lifetime-s", "1", "--oauth-client",
                 f"sp-1:{client_secret}") as sim:  # fmt: skip
        run = run_distributed(LOCUSTFILE_PATH, sim.url, results, "--provider", "databricks", "--deployment", "llama",
                              env=env)  # fmt: skip
    output = with_report(run, results)
    summary = read_summary(results)
    assert summary["throughput"]["requests_ok"] > 0 and set(summary["failures"]) >= ECHOED_KINDS, output[-3000:]
    assert summary["auth"]["flow"] == "databricks-m2m" and len(summary["auth"]["refreshes_by_worker"]) == 2
    with (results / "locust_failures.csv").open() as f:  # the echoed tokens reached Locust's failures, redacted
        assert f"authorization: Bearer {REDACTED}" in f.read()
    assert_no_secret(results, output, client_secret, azure_secret, *key_lines)
    texts = [output, *(p.read_text(errors="replace") for p in results.rglob("*") if p.is_file())]
    bearers = [m for text in texts for m in re.findall(r"Bearer(?:\s|%20|\+)+(.{10})", text, re.IGNORECASE)]
    assert bearers and all(REDACTED[:10] in m or "REDACTED" in m for m in bearers), bearers[:5]


AWS_SECRET = "".join(secrets.choice(string.ascii_letters + string.digits + "/+") for _ in range(40))
"""A planted AWS secret access key: well formed (40 characters of base64), so the run goes on to sign with it."""
AWS_TOKEN = f"{secrets.token_hex(12)}'&<>\"%/+={secrets.token_hex(12)}"
"""A planted AWS session token (no whitespace, as the up-front check asks), with `'&<>"%` inside."""


@pytest.mark.alone  # every worker's requests within a short run
def test_planted_aws_secrets_through_master_and_workers(tmp_path):
    """--provider bedrock, ConverseStream SigV4-signed with a secret key and session token from each process's
    environment; a master with 2 worker processes, DEBUG logs (botocore's canonical request holds the token), and a
    simulator verifying every signature and echoing every request header (`X-Amz-Security-Token` included) in its
    HTTP errors and its mid-stream exceptions: neither secret in any output."""
    results = tmp_path / "results"
    env = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID="AKIAIOSFODNN7EXAMPLE", AWS_SECRET_ACCESS_KEY=AWS_SECRET, AWS_SESSION_TOKEN=AWS_TOKEN,
               AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE=str(tmp_path / "none"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"))  # fmt: skip
    sigv4 = tmp_path / "credential"
    sigv4.write_text(f"AKIAIOSFODNN7EXAMPLE:{AWS_SECRET}:{AWS_TOKEN}\n")
    with run_sim(*SIM_ARGS, "--sigv4", f"@{sigv4}") as sim:
        run = run_distributed(ROOT / "locustfiles" / "converse.py", sim.url, results, "--provider", "bedrock", env=env)
        auth = sim.auth()
    output = with_report(run, results)
    summary = read_summary(results)
    assert summary["run"]["workers_max"] == 2 and summary["throughput"]["requests_ok"] > 0, output[-3000:]
    assert set(summary["failures"]) >= ECHOED_KINDS and auth["refused"] == 0 and auth["verified"] > 0
    with (results / "locust_failures.csv").open() as f:  # the echoes reached Locust's failures, redacted
        failures = " ".join(row["Error"] for row in csv.DictReader(f))
    assert "simulated engine failure; request headers: " in failures  # (cut at 200 characters: before the token)
    assert f"x-amz-security-token:{REDACTED}" in output  # botocore's debug log of each canonical request, redacted
    assert_no_secret(results, output, AWS_SECRET, AWS_TOKEN)
