"""Load-test embeddings (POST /v1/embeddings): request latency, inputs/s and input tokens/s.

    locust -f locustfiles/embeddings.py --host http://127.0.0.1:8000 --model NAME \
        --embedding-batch 8 --prompt-tokens 256 --headless -u 16 -r 4 --run-time 2m

Not streamed: each request's latency is its E2E (`e2e_ms`); there is no TTFT or ITL.
"""

from locust import events

from llm_locust.runtime.plugin import install
from llm_locust.runtime.users import EmbeddingsUser

install(events)


class EmbeddingUser(EmbeddingsUser):
    """One simulated client sending embeddings requests back to back."""
