"""Load-test vLLM's score API (POST /v1/score: text_1 scored with each of text_2): request latency, documents/s and
input tokens/s.

    locust -f locustfiles/score.py --host http://127.0.0.1:8000 --model NAME \
        --embedding-batch 16 --prompt-tokens 128 --headless -u 16 -r 4 --run-time 2m

Each request carries a query as text_1 and --embedding-batch documents as text_2, all prompt texts (synthetic of
--prompt-tokens, or a --dataset entry's). Not streamed: each request's latency is its E2E (`e2e_ms`); there is no
TTFT or ITL.
"""

from locust import events

from llm_locust.runtime.plugin import install
from llm_locust.runtime.users import ScoreUser

install(events)


class ScoringUser(ScoreUser):
    """One simulated client sending score requests back to back."""
