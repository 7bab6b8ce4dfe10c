"""The chat completions API (`POST /v1/chat/completions`): its request and its `chat.completion.chunk` events.

The request's `messages` and `max_tokens` (or `max_completion_tokens`). The stream opens with the role event,
`delta: {"role": "assistant", "content": ""}`, then one `delta: {"content": ...}` chunk per token, as text
completions' chunks (`completions.py`) otherwise.
"""

from __future__ import annotations

from typing import Any

import orjson

from llm_locust.sim.apis.completions import OPEN_CHOICE_TAIL, ChunkEncoder
from llm_locust.sim.apis.wire import Api, CompletionSpec, completion_spec, messages_prompt, optional_int
from llm_locust.sim.words import WORDS


def parse(data: dict[str, Any], natural_tokens: int) -> CompletionSpec:
    """The spec of a chat completion request `data` (ApiError if it is unacceptable)."""
    prompt_tokens, prompt_text = messages_prompt(data)
    max_tokens = optional_int(data, "max_tokens")
    if max_tokens is None:
        max_tokens = optional_int(data, "max_completion_tokens")
    return completion_spec(data, "chat", prompt_tokens, prompt_text, max_tokens, natural_tokens)


class ChatEncoder(ChunkEncoder):
    """The chunks of one chat completion (see the module docstring)."""

    __slots__ = ()

    OBJECT = b"chat.completion.chunk"
    BODY_OBJECT = "chat.completion"
    TOKEN_OPEN = b',"choices":[{"index":0,"delta":{"content":'
    CLOSING = b"}"
    TAILS = tuple(orjson.dumps(word) + b"}" + OPEN_CHOICE_TAIL for word in WORDS)

    def start_events(self) -> bytes:
        """Return the role event, `delta: {"role": "assistant", "content": ""}`, sent with the response head."""
        return (
            self._head
            + b',"choices":[{"index":0,"delta":{"role":"assistant","content":""},'
            + b'"logprobs":null,"finish_reason":null}]}\n\n'
        )

    def choice(self, text: str) -> dict[str, Any]:
        """The non-streamed response's one choice: the assistant's message carrying `text`."""
        message = {"role": "assistant", "content": text}
        return {"index": 0, "message": message, "logprobs": None, "finish_reason": self.spec.finish_reason}


API = Api("chat", "/v1/chat/completions", "chatcmpl", parse, ChatEncoder)
