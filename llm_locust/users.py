"""Kept import path for locustfiles: `from llm_locust.users import ChatCompletionsUser, ...`."""

from llm_locust.runtime.users import (
    ChatCompletionsUser,
    CompletionsUser,
    EmbeddingsUser,
    MessagesUser,
    ResponsesUser,
)

__all__ = ["ChatCompletionsUser", "CompletionsUser", "EmbeddingsUser", "MessagesUser", "ResponsesUser"]
