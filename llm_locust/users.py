"""Kept import path for locustfiles: `from llm_locust.users import ChatCompletionsUser, ...`."""

from llm_locust.runtime.users import (
    ChatAgentUser,
    ChatCompletionsUser,
    CompletionsUser,
    EmbeddingsUser,
    MessagesAgentUser,
    MessagesUser,
    ResponsesAgentUser,
    ResponsesUser,
)

__all__ = [
    "ChatAgentUser",
    "ChatCompletionsUser",
    "CompletionsUser",
    "EmbeddingsUser",
    "MessagesAgentUser",
    "MessagesUser",
    "ResponsesAgentUser",
    "ResponsesUser",
]
