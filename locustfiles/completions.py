"""Stream text completions (/v1/completions) and measure TTFT, ITL, TPOT, E2E.

locust -f locustfiles/completions.py --host http://127.0.0.1:8000 --model NAME --headless -u 8 -t 1m
"""

from locust import events

from llm_locust.runtime.plugin import install
from llm_locust.runtime.users import CompletionsUser

install(events)


class TextCompletionUser(CompletionsUser):
    """One simulated client sending streamed text completions back to back."""
