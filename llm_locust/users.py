"""The public names a locustfile imports: the users (`from llm_locust.users import LLMUser, ChatCompletionsUser,
...`: `LLMUser` and the built-in users made from the APIs' entries, `runtime.users.BUILT_IN_USERS`) and the types a
scenario's call returns (`Answer`, `CheckedAnswer`, `ToolCallAnswer`, `Usage`)."""

from llm_locust.runtime.answer import Answer, CheckedAnswer, ToolCallAnswer, Usage
from llm_locust.runtime.users import BUILT_IN_USERS, LLMUser

globals().update(BUILT_IN_USERS)

__all__ = ["Answer", "CheckedAnswer", "LLMUser", "ToolCallAnswer", "Usage", *BUILT_IN_USERS]
