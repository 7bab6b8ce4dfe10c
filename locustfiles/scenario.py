"""The smallest scenario: one task that asks a question, measured like the built-in users (docs/scenarios.md)."""

from locust import events, task

from llm_locust.plugin import install
from llm_locust.users import LLMUser

install(events)


class Assistant(LLMUser):
    @task
    def ask(self):
        self.llm.chat.completions.create(messages=[{"role": "user", "content": "Name a river."}], name="ask")
