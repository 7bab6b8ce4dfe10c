"""Locust User classes that stream completions from an OpenAI-compatible endpoint.

`ChatCompletionsUser` (POST /v1/chat/completions) and `CompletionsUser` (POST /v1/completions)
send when the process's pacer hands them a ticket: in closed loop as soon as their last request
ended, in open loop (`--request-rate`) at the due times of the arrival process. Subclass them
in a locustfile (see locustfiles/chat.py) after `llm_locust.plugin.install(events)`; the
plugin supplies the settings (command-line options) and collects the metrics.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import orjson
from locust import FastHttpUser, constant, task

from llm_locust.client import stream_completion
from llm_locust.errors import ConfigError
from llm_locust.plugin import run_state
from llm_locust.settings import Settings
from llm_locust.workload import PromptFactory, chat_body, completions_body


class _StreamingUser(FastHttpUser):
    """Shared machinery: timeouts and auth from the settings, the model, one request per task."""

    abstract = True
    wait_time = constant(0)
    path: ClassVar[str]
    endpoint: ClassVar[str]
    make_body: ClassVar[Callable[[Settings, str, str], bytes]]  # (settings, model, prompt) -> JSON

    def __init__(self, environment: Any) -> None:
        self.llm = run_state(environment)
        settings = self.llm.settings
        # FastHttpUser reads these when it builds its client in __init__; read and request
        # timeouts are the watchdog's (a socket timeout would cost a timer per read)
        self.connection_timeout = settings.connect_timeout_s
        self.network_timeout = None
        super().__init__(environment)
        self.headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
        if settings.api_key:
            self.headers["Authorization"] = f"Bearer {settings.api_key}"
        self.prompts = PromptFactory()
        self.model = ""

    def on_start(self) -> None:
        """Resolve the model once per process (GET /v1/models when --model is not given)."""
        self.model = self.llm.model or self.llm.resolve_model(lambda: self._first_model())

    def _first_model(self) -> str:
        """The id of the first model the server lists at /v1/models."""
        with self.client.get("/v1/models", headers=self.headers, catch_response=True) as resp:
            if resp.status_code != 200:
                resp.failure(f"HTTP {resp.status_code}")
                raise ConfigError(
                    f"--model not given and GET {self.host}/v1/models answered HTTP {resp.status_code}: "
                    "pass --model NAME"
                )
            try:
                return orjson.loads(resp.content)["data"][0]["id"]
            except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
                resp.failure("no model listed")
                raise ConfigError(
                    f"--model not given and {self.host}/v1/models lists no model: pass --model NAME"
                ) from None

    @task
    def complete(self) -> None:
        """Send one streaming request when the pacer says so and read it to the end."""
        ticket = self.llm.pacer.take()
        settings = self.llm.settings
        body = self.make_body(settings, self.model, self.prompts.prompt(settings.prompt_tokens))
        stream_completion(self.client, self.path, body, self.headers, self.endpoint, self.llm.watchdog, ticket)


class ChatCompletionsUser(_StreamingUser):
    """Streams POST /v1/chat/completions with a synthetic user message."""

    abstract = True
    path = "/v1/chat/completions"
    endpoint = "chat"
    make_body = staticmethod(chat_body)


class CompletionsUser(_StreamingUser):
    """Streams POST /v1/completions with a synthetic prompt."""

    abstract = True
    path = "/v1/completions"
    endpoint = "completions"
    make_body = staticmethod(completions_body)
