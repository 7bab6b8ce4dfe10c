"""Stream Amazon Bedrock's ConverseStream API (POST /model/{modelId}/converse-stream) and measure TTFT, TTFO, ITL,
TPOT, E2E.

    AWS_PROFILE=loadtest locust -f locustfiles/converse.py --provider bedrock \
        --host https://bedrock-runtime.us-east-1.amazonaws.com \
        --model anthropic.claude-3-5-haiku-20241022-v1:0 --headless -u 4 -r 1 --run-time 1m

Signed with SigV4 from the AWS credential chain (environment, profile, container or instance role), or sent with a
Bedrock API key as bearer token when AWS_BEARER_TOKEN_BEDROCK is set (docs/workloads.md "Providers and auth"). The
answer streams as AWS event-stream messages; TTFT starts at the first `contentBlockDelta` carrying text, reasoning or
tool input (docs/apis.md).
"""

from locust import events

from llm_locust.runtime.plugin import install
from llm_locust.runtime.users import ConverseUser

install(events)


class ConverseApiUser(ConverseUser):
    """One simulated client sending streamed ConverseStream requests back to back."""
