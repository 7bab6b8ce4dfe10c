"""Stream Gemini's streamGenerateContent (the Gemini API, or Vertex AI) and measure TTFT, TTFO, ITL, TPOT, E2E.

    GEMINI_API_KEY=... locust -f locustfiles/gemini.py --provider gemini \
        --host https://generativelanguage.googleapis.com --model gemini-2.5-flash --headless -u 4 -r 1 --run-time 1m

With `--provider vertex` (and `--vertex-project`, `--vertex-location`, `--host https://LOCATION-aiplatform.googleapis.com`)
it streams Vertex AI's `publishers/google/models/MODEL:streamGenerateContent`. TTFT starts at the first event whose
parts carry text (a thought part included) or a function call (docs/apis.md).
"""

from locust import events

from llm_locust.runtime.plugin import install
from llm_locust.runtime.users import GeminiUser

install(events)


class GeminiApiUser(GeminiUser):
    """One simulated client sending streamed Gemini requests back to back."""
