"""Locust User classes that stream completions from an OpenAI-compatible endpoint.

`ChatCompletionsUser` (POST /v1/chat/completions) and `CompletionsUser` (POST /v1/completions)
run closed-loop: each user sends its next request as soon as the last one ended. Subclass them
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
from llm_locust.redact import redact
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

    def _first_model(self) -> str:
        """The id of the first model the server lists at /v1/models; ConfigError naming the fix."""
        with self.client.get("/v1/models", headers=self.headers, catch_response=True) as resp:
            status = resp.status_code
            if status != 200:
                resp.failure(f"HTTP {status}")
                if not status:  # no response at all
                    cause = getattr(resp.error, "original", None) or resp.error  # unwrap RetriesExceeded
                    raise ConfigError(
                        f"could not connect to {redact(self.host)} ({redact(f'{type(cause).__name__}: {cause}')}): "
                        "check --host and that the server is running"
                    )
                fix = "check the API key (--api-key-env / --api-key)" if status in (401, 403) else "pass --model NAME"
                raise ConfigError(
                    f"--model not given and GET {redact(self.host)}/v1/models answered HTTP {status}: {fix}"
                )
            try:
                return orjson.loads(resp.content)["data"][0]["id"]
            except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
                resp.failure("no model listed")
                raise ConfigError(
                    f"--model not given and {redact(self.host)}/v1/models lists no model: pass --model NAME"
                ) from None

    @task
    def complete(self) -> None:
        """Send one streaming request and read it to the end.

        The model is resolved on the first request (not in `on_start`: Locust prints a traceback
        for any exception there, and a wrong --host is a user error).
        """
        if not self.model:
            self.model = self.llm.model or self.llm.resolve_model(self._first_model)
        settings = self.llm.settings
        body = self.make_body(settings, self.model, self.prompts.prompt(settings.prompt_tokens))
        stream_completion(self.client, self.path, body, self.headers, self.endpoint, self.llm.watchdog)


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
