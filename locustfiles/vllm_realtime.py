"""Load-test vLLM's realtime transcription over WebSocket (GET /v1/realtime, upgraded): sessions of utterances, each
measured as one request — its audio streamed at real-time pace, then time to first `transcription.delta` after the
end of the audio (TTFT), the gaps between deltas (ITL) and the turn's latency to `transcription.done` (E2E), broken
down by turn; the audio's seconds give the run's audio seconds per second and real-time factor.

    locust -f locustfiles/vllm_realtime.py --host http://127.0.0.1:8000 \
        --model mistralai/Voxtral-Mini-4B-Realtime-2602 --headless -u 16 -r 4 --run-time 2m

Each user plays one session after another on its own socket (`wss://` for an https host): `turns` utterances of
`utterance_s` seconds each, each transcribed in full before the next. The audio is silence (16 kHz 16-bit mono PCM)
unless `audio_file` names a WAV of that format, whose frames every utterance sends (a real model transcribes speech:
set it, in a subclass, to a recording). Subclass `VllmRealtimeSessionUser` to change them.
"""

import wave

from locust import events, task

from llm_locust.apis.vllm_realtime import AUDIO_BYTES_PER_S
from llm_locust.plugin import install
from llm_locust.users import LLMUser

install(events)


class VllmRealtimeSessionUser(LLMUser):
    """One simulated client playing realtime transcription sessions back to back."""

    turns = 3
    utterance_s = 2.0
    audio_file = ""

    def utterance(self) -> bytes:
        """An utterance's audio: `audio_file`'s frames, or `utterance_s` of silence."""
        if not self.audio_file:
            return bytes(round(self.utterance_s * AUDIO_BYTES_PER_S / 2) * 2)
        with wave.open(self.audio_file, "rb") as wav:
            if (wav.getframerate(), wav.getsampwidth(), wav.getnchannels()) != (16_000, 2, 1):
                raise ValueError(f"{self.audio_file}: vLLM's realtime endpoint takes 16 kHz 16-bit mono PCM")
            return wav.readframes(wav.getnframes())

    @task
    def session(self) -> None:
        audio = self.utterance()
        with self.llm.vllm_realtime.connect() as session:
            for turn in range(1, self.turns + 1):
                session.turn(audio=audio, model=session.model if turn == 1 else None)
