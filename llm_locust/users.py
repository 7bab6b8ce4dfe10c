"""Kept import path for locustfiles: `from llm_locust.users import LLMUser, ChatCompletionsUser, ...`."""

from llm_locust.runtime.users import (
    ChatAgentUser,
    ChatCompletionsUser,
    CompletionsUser,
    ConverseUser,
    EmbeddingsUser,
    GeminiUser,
    LLMUser,
    MessagesAgentUser,
    MessagesUser,
    ResponsesAgentUser,
    ResponsesUser,
)

__all__ = [
    "ChatAgentUser",
    "ChatCompletionsUser",
    "CompletionsUser",
    "ConverseUser",
    "EmbeddingsUser",
    "GeminiUser",
    "LLMUser",
    "MessagesAgentUser",
    "MessagesUser",
    "ResponsesAgentUser",
    "ResponsesUser",
]
