"""Stream the OpenAI Responses API (POST /v1/responses) and measure TTFT, TTFO, ITL, TPOT, E2E.

    locust -f locustfiles/responses.py --host http://127.0.0.1:8000 --model NAME \
        --headless -u 16 -r 4 --run-time 2m

TTFT starts at the first `response.output_text.delta` (or reasoning / refusal / function-call-arguments delta);
usage comes from `response.completed` (docs/apis.md).
"""

from locust import events

from llm_locust.runtime.plugin import install
from llm_locust.runtime.users import ResponsesUser

install(events)


class ResponsesApiUser(ResponsesUser):
    """One simulated client sending streamed Responses API requests back to back."""
