"""The engine tier's speech-to-text scenario (tests/engine_tier/test_speech_to_text.py runs it with `locust -f`): the
users send the spoken clips listed in the JSON file $LLM_LOCUST_SPOKEN_CLIPS (`[[name, WAV path, reference text],
...]`) in turn, one after the other across users, each named by its clip (`name=`) and scored by its word error rate
against its reference (`heard_right`): the run's accuracy is 1 − the mean WER."""

import itertools
import json
import os
from pathlib import Path

from locust import events, task

from llm_locust.apis.transcriptions import heard_right
from llm_locust.runtime.plugin import install
from llm_locust.runtime.users import LLMUser

install(events)

CLIPS_ENV = "LLM_LOCUST_SPOKEN_CLIPS"


class Listener(LLMUser):
    """Sends each clip's WAV bytes (so the client reads its seconds from the header) in turn, not streamed."""

    clips: list[tuple[str, bytes, str]] = []
    turns = itertools.count()

    def on_start(self) -> None:
        if not Listener.clips:
            listed = json.loads(Path(os.environ[CLIPS_ENV]).read_text())
            Listener.clips = [(name, Path(path).read_bytes(), reference) for name, path, reference in listed]

    @task
    def transcribe(self) -> None:
        name, wav, reference = self.clips[next(self.turns) % len(self.clips)]
        self.llm.audio.transcriptions.create(
            file=(f"{name}.wav", wav, "audio/wav"), language="en", name=name, score=heard_right(reference)
        )
