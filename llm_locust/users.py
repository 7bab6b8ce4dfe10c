"""The public names a locustfile imports: the users (`from llm_locust.users import LLMUser, ChatCompletionsUser,
...`) and the types a scenario's call returns (`Answer`, `CheckedAnswer`, `ToolCallAnswer`, `Usage`)."""

from llm_locust.runtime.answer import Answer, CheckedAnswer, ToolCallAnswer, Usage
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
    "Answer",
    "ChatAgentUser",
    "ChatCompletionsUser",
    "CheckedAnswer",
    "CompletionsUser",
    "ConverseUser",
    "EmbeddingsUser",
    "GeminiUser",
    "LLMUser",
    "MessagesAgentUser",
    "MessagesUser",
    "ResponsesAgentUser",
    "ResponsesUser",
    "ToolCallAnswer",
    "Usage",
]
