"""Retrieval: embed the question, pick the context from a local list, answer with it (docs/scenarios.md).

    locust -f locustfiles/scenarios/retrieval.py --host http://127.0.0.1:8000 --headless -u 8 -t 1m

Each run of `ask` is one arrival (`--request-rate`): its embedding, then its answer right after.
"""

import random

from locust import events, task

from llm_locust.plugin import install
from llm_locust.users import LLMUser

install(events)

DOCUMENTS = (
    "The river runs past the harbor and under the old stone bridge.",
    "Glaciers carve the valley; the meadow below floods every spring.",
    "The tower clock is wound by hand each morning by the keeper.",
    "Olive oil, lemon and salt make the island's only sauce.",
)
QUESTIONS = ("Where does the river run?", "What carves the valley?", "Who winds the clock?", "What is the sauce?")


def best_context(question: str) -> str:
    """The document sharing the most words with `question` (a stand-in for a vector search)."""
    words = set(question.lower().strip("?").split())
    return max(DOCUMENTS, key=lambda document: len(words & set(document.lower().strip(".").split())))


class RetrievalUser(LLMUser):
    @task
    def ask(self):
        question = random.choice(QUESTIONS)
        self.llm.embeddings.create(input=question, name="embed question")
        self.llm.chat.completions.create(
            messages=[
                {"role": "system", "content": f"Answer from this context only: {best_context(question)}"},
                {"role": "user", "content": question},
            ],
            max_tokens=48,
            name="answer with context",
        )
