"""Load-test speech to text (POST /v1/audio/transcriptions, multipart, streamed): time to first text, the gaps between
text deltas, E2E, the transcript's words.

    locust -f locustfiles/transcriptions.py --host http://127.0.0.1:8000 --model openai/whisper-small \
        --prompt-tokens 25 --headless -u 8 -r 2 --run-time 2m

Each request speaks its prompt: a WAV as long as the prompt read at 150 words a minute (--prompt-tokens 25: 10 s of
audio; llm_locust/apis/transcriptions.py). --extra-body '{"stream": false}': one JSON body, its latency E2E.
"""

from locust import events

from llm_locust.runtime.plugin import install
from llm_locust.runtime.users import TranscriptionsUser

install(events)


class TranscriptionUser(TranscriptionsUser):
    """One simulated client sending transcription requests back to back."""
