"""The speech-to-text API (`POST /v1/audio/transcriptions`): its multipart request and its transcript.

The request is multipart/form-data (`forms.multipart_form`): a WAV `file` (the only audio the simulator reads; another
is HTTP 400), `model`, `language`, `response_format` (`json`, the default, or `text`). The audio's duration is its
header's (frames over frame rate); its prompt is `AUDIO_TOKENS_PER_S` tokens per second of it (Whisper's encoder
frames). What it "hears": the text of the file's `LIST`/`INFO` `ICMT` comment (llm-locust's synthetic speech carries
its words there), else the simulator's words, `WORDS_PER_S` of them per second of audio; each word heard right with
probability `--accuracy`, else as another word (`Transcript`: a word error rate under load). Each word is one output
token, sent with the space before it (the first without).

Streamed (`stream=true`), as OpenAI streams it (the openai SDK's `TranscriptionStreamEvent`s): one
`data: {"type": "transcript.text.delta", "delta": ...}` event per word (per `--tokens-per-chunk` words), then
`{"type": "transcript.text.done", "text": ..., "usage": {"type": "tokens", "input_tokens", "output_tokens",
"total_tokens"}}`; the events carry no id: the `x-request-id` header names the request. A mid-stream failure is an
`{"type": "error", "error": {...}}` event. Not streamed: one JSON object, `{"text": ..., "usage": {...}}`.
"""

from __future__ import annotations

import io
import math
import random
import re
import struct
import wave
from typing import Any, Protocol

import orjson

from llm_locust.sim.apis.forms import FormFile, multipart_form
from llm_locust.sim.apis.wire import Api, CompletionSpec, bad_request
from llm_locust.sim.words import WORDS

AUDIO_TOKENS_PER_S = 50
"""The prompt tokens of a second of audio (Whisper's encoder: 1500 frames per 30 s window)."""
WORDS_PER_S = 2.5
"""The words the simulator hears per second of audio that carries no text of its own (150 a minute)."""
FORMATS = ("json", "text")
_PIECE = re.compile(r"\s*\S+")


def spoken_text(content: bytes) -> tuple[float, str | None]:
    """A WAV file's duration (s) and the text of its `LIST`/`INFO` `ICMT` comment (None: it has none); ApiError when
    it is not a WAV file."""
    try:
        with wave.open(io.BytesIO(content), "rb") as wav:
            duration_s = wav.getnframes() / wav.getframerate()
    except (wave.Error, EOFError, ZeroDivisionError) as e:
        raise bad_request(f"'file' is not a WAV file the simulator can read: {e}") from None
    at = 12  # after "RIFF", its size and "WAVE": one chunk after another (id, size, data padded to even)
    while at + 8 <= len(content):
        chunk, size = content[at : at + 4], struct.unpack_from("<I", content, at + 4)[0]
        data = content[at + 8 : at + 8 + size]
        if chunk == b"LIST" and data[:4] == b"INFO":
            inner = 4
            while inner + 8 <= len(data):
                kind, length = data[inner : inner + 4], struct.unpack_from("<I", data, inner + 4)[0]
                if kind == b"ICMT":
                    return duration_s, data[inner + 8 : inner + 8 + length].rstrip(b"\x00").decode(errors="replace")
                inner += 8 + length + length % 2
        at += 8 + size + size % 2
    return duration_s, None


class Draws(Protocol):
    """The simulator's answer draws (`answers.Answerer`): is an answer right, and the draws of its values."""

    values: random.Random

    def right(self, batch: int) -> bool: ...


class Transcript:
    """What the simulator hears in one audio: its `pieces` (one per output token: each word with the space before
    it; `wire.Scripted`, `kind` None: not an answer the simulator's metrics count by kind). With an `answerer`
    (`answers.Answerer.plan` gives it), each word is heard right with its probability (`--accuracy`), else as another
    word (`wrong`: how many), drawn once as it is settled for the batch the request was admitted into."""

    __slots__ = ("answerer", "audio_s", "batch", "pieces", "settled", "wrong")

    kind = None

    def __init__(self, text: str, audio_s: float = 0.0) -> None:
        self.pieces = tuple(_PIECE.findall(text.strip()))
        self.audio_s = audio_s
        self.answerer: Draws | None = None
        self.settled = False
        self.wrong = 0
        self.batch = 0

    def settle(self, batch: int) -> None:
        """Decide which words are heard wrong (once), for a request admitted into a batch of `batch` sequences."""
        if self.settled:
            return
        self.settled, self.batch, answerer = True, batch, self.answerer
        if answerer is None:
            return
        pieces = list(self.pieces)
        for i, piece in enumerate(pieces):
            if not answerer.right(batch):
                word = piece.lstrip()
                other = word
                while other == word:
                    other = answerer.values.choice(WORDS).strip()
                pieces[i] = piece[: len(piece) - len(word)] + other
                self.wrong += 1
        self.pieces = tuple(pieces)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form served by /sim/trace: the text sent, its words heard wrong, the audio's seconds."""
        return {"kind": "transcript", "text": "".join(self.pieces), "batch": self.batch, "wrong_words": self.wrong,
                "audio_s": self.audio_s}  # fmt: skip


def parse(data: dict[str, Any], natural_tokens: int) -> CompletionSpec:
    """The spec of a transcription request's fields `data` (ApiError if it is unacceptable); `natural_tokens` is not
    used: the transcript is as long as the audio says."""
    audio = data.get("file")
    if not isinstance(audio, FormFile):
        raise bad_request("'file' is required: the audio, as a file part of the multipart form")
    response_format = data.get("response_format", "json")
    if response_format not in FORMATS:
        raise bad_request(f"response_format {response_format!r} is not one the simulator writes: {', '.join(FORMATS)}")
    duration_s, text = spoken_text(audio.content)
    if text is None:
        text = " ".join(WORDS[i % len(WORDS)].strip() for i in range(max(round(duration_s * WORDS_PER_S), 1)))
    transcript = Transcript(text, duration_s)
    if not transcript.pieces:
        raise bad_request("the audio says nothing: its comment has no words")
    stream = data.get("stream", "false")
    if stream not in ("true", "false"):
        raise bad_request(f"'stream' must be true or false, got {stream!r}")
    return CompletionSpec(
        stream=stream == "true", include_usage=True, prompt_tokens=max(math.ceil(duration_s * AUDIO_TOKENS_PER_S), 1),
        output_tokens=len(transcript.pieces), finish_reason="stop", answer=transcript,
    )  # fmt: skip


def _delta(text: str) -> bytes:
    """One `transcript.text.delta` event carrying `text`."""
    return b"data: " + orjson.dumps({"type": "transcript.text.delta", "delta": text}) + b"\n\n"


class TranscriptEncoder:
    """The response of one transcription: its delta events (one per word) and its done event, or its whole JSON
    body."""

    __slots__ = ("_model", "spec")

    def __init__(self, spec: CompletionSpec, response_id: str, created_s: int, model: str, offset: int) -> None:
        self.spec = spec
        self._model = model

    def _text(self) -> str:
        return "".join(self.spec.answer.pieces)  # type: ignore[union-attr]

    def start_events(self) -> bytes:
        """None: the first event is the first word's."""
        return b""

    def token_event(self, index: int) -> tuple[bytes, bytes]:
        """Word `index`'s event as (empty prefix, event), encoded as it is written (its words are settled at the
        first token)."""
        return b"", _delta(self.spec.answer.pieces[index])  # type: ignore[union-attr]

    def tokens_event(self, start: int, stop: int) -> bytes:
        """One delta event carrying words `start` .. `stop - 1`."""
        return _delta("".join(self.spec.answer.pieces[start:stop]))  # type: ignore[union-attr]

    def text_event(self, text: str) -> bytes:
        """A delta event carrying `text`."""
        return _delta(text)

    def end_events(self) -> list[bytes]:
        """The `transcript.text.done` event: the whole text and the usage."""
        done = {"type": "transcript.text.done", "text": self._text(), "usage": self._usage()}
        return [b"data: " + orjson.dumps(done) + b"\n\n"]

    def error_event(self, message: str) -> bytes:
        """A mid-stream failure's `error` event."""
        error = {"message": message, "type": "InternalServerError", "code": 500}
        return b"data: " + orjson.dumps({"type": "error", "error": error}) + b"\n\n"

    def _usage(self) -> dict[str, Any]:
        spec = self.spec
        return {"type": "tokens", "input_tokens": spec.prompt_tokens, "output_tokens": spec.output_tokens,
                "total_tokens": spec.prompt_tokens + spec.output_tokens}  # fmt: skip

    def body(self) -> bytes:
        """The transcription JSON: its text and usage."""
        return orjson.dumps({"text": self._text(), "usage": self._usage()})


API = Api(
    name="transcriptions",
    paths=("/v1/audio/transcriptions", "/openai/deployments/{deployment}/audio/transcriptions"),  # OpenAI's, Azure's
    id_prefix="trsc",
    parse=parse,
    encoder=TranscriptEncoder,
    answer_encoder=TranscriptEncoder,  # (its words right or wrong by the answerer's draws: `answers.Answerer.plan`)
    request_id_header="x-request-id",
    decode=multipart_form,
)
