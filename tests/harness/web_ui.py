"""Locust's web UI in a test: HTTP to it, waiting for it, and a local runner serving it in this process."""

from __future__ import annotations

import urllib.parse
import urllib.request
from typing import Any

from conftest import free_port, new_env, wait_for


def http(url: str, form: dict | None = None, timeout_s: float = 10) -> bytes:
    """The body of GET `url` (POST of the urlencoded `form` when given)."""
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    with urllib.request.urlopen(url, data=data, timeout=timeout_s) as response:
        return response.read()


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
