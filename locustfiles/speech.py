"""Load-test text to speech (POST /v1/audio/speech): time to the first audio byte, the gaps between audio chunks,
E2E, audio seconds produced per second and the real-time factor.

    locust -f locustfiles/speech.py --host http://127.0.0.1:8000 --model NAME \
        --headless -u 4 -r 1 --run-time 2m

Each request reads its prompt aloud (voice alloy) as 24 kHz 16-bit mono pcm, streamed as the audio's own bytes: TTFT
is the first audio byte, each gap between pieces of audio an ITL sample. `--extra-body '{"stream_format": "sse"}'`
asks for `speech.audio.delta` events instead; `--extra-body '{"response_format": "wav", "voice": "nova"}'` changes
the audio (mp3, opus, aac and flac are timed but their seconds are not counted).
"""

from locust import events

from llm_locust.runtime.plugin import install
from llm_locust.runtime.users import SpeechUser

install(events)


class TextToSpeechUser(SpeechUser):
    """One simulated client sending text-to-speech requests back to back."""
