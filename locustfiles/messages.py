"""Stream the Anthropic Messages API (POST /v1/messages) and measure TTFT, TTFO, ITL, TPOT, E2E.

    ANTHROPIC_API_KEY=... locust -f locustfiles/messages.py --provider anthropic \
        --host https://api.anthropic.com --model claude-sonnet-4-5 --headless -u 4 -r 1 --run-time 1m

Without `--provider anthropic` it talks to any server that serves /v1/messages (vLLM, llama.cpp, LiteLLM) with
that provider's auth. TTFT starts at the first `content_block_delta` carrying text, thinking or tool input
(docs/apis.md).
"""

from locust import events

from llm_locust.runtime.plugin import install
from llm_locust.runtime.users import MessagesUser

install(events)


class MessagesApiUser(MessagesUser):
    """One simulated client sending streamed Messages API requests back to back."""
