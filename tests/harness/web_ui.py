"""Locust's web UI in a test: a `locust` process serving it, a local runner serving it in this process, HTTP to it
and waiting for it."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from conftest import ROOT, free_port, master_port_args, new_env, wait_for


def http(url: str, form: dict | None = None, timeout_s: float = 10) -> bytes:
    """The body of GET `url` (POST of the urlencoded `form` when given)."""
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    with urllib.request.urlopen(url, data=data, timeout=timeout_s) as response:
        return response.read()


def post(url: str, form: dict, headers: dict | None = None) -> tuple[int, dict]:
    """POST the urlencoded `form` to `url` (with `headers`, e.g. a browser's `Origin`): (HTTP status, the JSON
    answer)."""
    request = urllib.request.Request(url, urllib.parse.urlencode(form).encode(), headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def post_json(url: str, body: dict, headers: dict | None = None) -> tuple[int, bytes]:
    """POST `body` as JSON to `url` (with `headers`): (HTTP status, the answer's bytes)."""
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def template_args(page: str) -> dict:
    """The arguments Locust's page hands its script (`window.templateArgs`): the form's fields among them."""
    return json.loads(page.split("window.templateArgs = ", 1)[1].split("\n", 1)[0])


def ui_state(ui: str) -> str:
    """Locust's runner state as the web UI reports it ("ready" until a test starts)."""
    return json.loads(http(f"{ui}/stats/requests"))["state"]


def wait_for_page(url: str, timeout_s: float) -> str:
    """The page at `url` once it answers (a web UI starting up)."""

    def page() -> str | None:
        try:
            return http(url).decode()
        except OSError:
            return None

    return wait_for(page, timeout_s, f"the web UI at {url}")


def local_runner_with_web_ui(opts: Any, user_classes: list | None = None) -> tuple[Any, Any, Any, str]:
    """A local runner in this process (of `user_classes`, default chat) with Locust's web UI on a free port:
    (env, runner, web UI, URL)."""
    env = new_env(opts, user_classes)
    runner = env.create_local_runner()
    port = free_port()
    web_ui = env.create_web_ui("127.0.0.1", port, delayed_start=True)
    env.events.init.fire(environment=env, runner=runner, web_ui=web_ui)
    web_ui.start()
    return env, runner, web_ui, f"http://127.0.0.1:{port}"


@dataclass
class WebUiProcess:
    """A `locust` process serving its web UI: `url`; `output` (its stdout and stderr) once it has ended."""

    process: subprocess.Popen[str]
    url: str
    output: str = ""


@contextlib.contextmanager
def locust_web_ui(*args: str, web_host: str | None = "127.0.0.1") -> Iterator[WebUiProcess]:
    """`locust *args` (e.g. `-f locustfile --host ...`) with its web UI at a free port of 127.0.0.1 (`--web-host
    web_host`; None: no --web-host, the default address) (with `--processes`, on a free master port too: another
    run's workers must never join it), terminated when the block ends."""
    port = free_port()
    command = [sys.executable, "-m", "locust", *args, "--web-port", str(port)]
    if web_host is not None:
        command += ["--web-host", web_host]
    if "--processes" in args:
        command += master_port_args()
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    run = WebUiProcess(process, f"http://127.0.0.1:{port}")
    try:
        yield run
    finally:
        process.terminate()
        run.output = process.communicate(timeout=30)[0]
