"""Load-test rerank (POST /v1/rerank: a query and documents): request latency, documents/s and input tokens/s.

    locust -f locustfiles/rerank.py --host http://127.0.0.1:8000 --model NAME \
        --embedding-batch 16 --prompt-tokens 128 --headless -u 16 -r 4 --run-time 2m

Each request carries a query and --embedding-batch documents, all prompt texts (synthetic of --prompt-tokens, or a
--dataset entry's). Not streamed: each request's latency is its E2E (`e2e_ms`); there is no TTFT or ITL.
"""

from locust import events

from llm_locust.runtime.plugin import install
from llm_locust.runtime.users import RerankUser

install(events)


class RerankingUser(RerankUser):
    """One simulated client sending rerank requests back to back."""
