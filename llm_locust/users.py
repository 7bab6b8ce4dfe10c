"""Kept import path for locustfiles: `from llm_locust.users import ChatCompletionsUser, CompletionsUser`."""

from llm_locust.runtime.users import ChatCompletionsUser, CompletionsUser

__all__ = ["ChatCompletionsUser", "CompletionsUser"]
