"""Stream chat completions from an OpenAI-compatible endpoint and measure TTFT, ITL, TPOT, E2E.

    locust -f locustfiles/chat.py --host http://127.0.0.1:8000 --model NAME \
        --headless -u 32 -r 8 --run-time 2m --csv results/run1/locust --csv-full-history

`llm-locust options` lists the options llm-locust adds (Locust's own --help runs before this
file is loaded, so it cannot show them).
"""

from locust import events

from llm_locust.runtime.plugin import install
from llm_locust.runtime.users import ChatCompletionsUser

install(events)


class ChatUser(ChatCompletionsUser):
    """One simulated client sending streamed chat completions back to back."""
