"""A `SequentialTaskSet` mixing chat, the Responses API and embeddings, in that order (docs/scenarios.md).

    locust -f locustfiles/scenarios/mixed_sequence.py --host http://127.0.0.1:8000 --headless -u 4 -t 1m

Each task of the sequence is one arrival (`--request-rate`).
"""

from locust import SequentialTaskSet, events, task

from llm_locust.plugin import install
from llm_locust.users import LLMUser

install(events)


class Research(SequentialTaskSet):
    @task
    def draft(self):
        answer = self.user.llm.chat.completions.create(
            messages=[{"role": "user", "content": "Draft a title."}], max_tokens=16, name="draft"
        )
        self.title = answer.text

    @task
    def expand(self):
        self.user.llm.responses.create(input=f"Expand: {self.title}", max_output_tokens=32, name="expand")

    @task
    def index(self):
        self.user.llm.embeddings.create(input=[self.title, "a second text"], name="index")


class ResearchUser(LLMUser):
    tasks = [Research]
