"""vLLM's realtime transcription over WebSocket (`GET /v1/realtime`, upgraded): a session of utterances, each
transcribed on the timing model.

vLLM serves it at the path of the OpenAI Realtime API (`realtime`), so this module serves that path for both: a
session speaks vLLM's protocol when its first client event is vLLM's — a `session.update` naming the `model` at its
top level (no `session` object), or an `input_audio_buffer.commit` — and the OpenAI Realtime API's otherwise (its
session, `realtime._Session`, takes every event): its `API` serves `realtime` too (`wire.Api.serves_too`), so the
registry routes the path here (`sim.apis.by_path`). On the handshake the server sends one `session.created` for
either: the OpenAI session object, and vLLM's `id` and `created` beside it.

vLLM's events (`vllm/entrypoints/openai/realtime/`): `session.update` (`model`, one the simulator serves; no answer),
`input_audio_buffer.commit` (an utterance starts; refused before a `session.update`, as vLLM's
`model_not_validated`), `input_audio_buffer.append` (base64 audio, 16 kHz 16-bit mono PCM; empty or not base64:
`invalid_audio`), `input_audio_buffer.commit` with `final: true` (the audio is over). The transcription is one
generation of the timing model, received when the read bringing the final commit arrived (the simulator waits for
the whole utterance; vLLM's engine may transcribe while it is heard): one `transcription.delta` per token (a word) at
its due time (the trace's `token_times`), then `transcription.done` with the `text`, `usage` (`prompt_tokens`: the
audio's, one per 80 ms — Voxtral Realtime's frame —, at least 1; `completion_tokens`, `total_tokens`) and `id`, the
trace's id (the simulator's own: vLLM's event has none). A client event it cannot take is answered by an `error`
event (`error`: the message, `code`); the session goes on. The trace's `session` is the session's id, its `answer`
`{"kind": "transcript", "audio_s", "audio_bytes"}`: the utterance's audio.
"""

from __future__ import annotations

import base64
import binascii
import time
from itertools import count
from typing import TYPE_CHECKING, Any

import orjson

from llm_locust.sim.apis import realtime
from llm_locust.sim.apis.wire import Api, ApiError, CompletionSpec, Encoder, bad_request, output_length, usage
from llm_locust.sim.words import WORDS

if TYPE_CHECKING:  # (sim.websocket imports this package's registry)
    from llm_locust.sim.trace import TraceRecord
    from llm_locust.sim.websocket import ApiSocket

AUDIO_BYTES_PER_S = 16_000 * 2
"""The input audio's bytes per second: 16 kHz 16-bit mono PCM, as vLLM's realtime endpoint takes it."""
PROMPT_TOKENS_PER_S = 12.5
"""The audio's prompt tokens per second: one per 80 ms (Voxtral Realtime's frame)."""
_sessions = count(1)


def _parse(data: dict[str, Any], natural_tokens: int) -> CompletionSpec:
    """An utterance's spec from `data`: its audio's tokens (`prompt_tokens`), the server's natural length."""
    return CompletionSpec(
        stream=True,
        include_usage=True,
        prompt_tokens=max(data["prompt_tokens"], 1),
        output_tokens=output_length({}, None, natural_tokens),
        finish_reason="stop",
        max_tokens=None,
        model=data["model"],
        endpoint="vllm_realtime",
    )


class _Heard:
    """The utterance's audio (`wire.Scripted`, `kind` None: nothing the simulator's metrics count by kind), for the
    trace."""

    __slots__ = ("audio_bytes",)

    kind = None
    pieces: tuple[str, ...] = ()

    def __init__(self, audio_bytes: int) -> None:
        self.audio_bytes = audio_bytes

    def settle(self, batch: int) -> None:
        """Nothing to decide: the transcript is the timing model's words."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form served by /sim/trace: the audio's seconds and bytes."""
        return {"kind": "transcript", "audio_s": self.audio_bytes / AUDIO_BYTES_PER_S, "audio_bytes": self.audio_bytes}


class _Deltas:
    """The server events of one transcription (the simulator's `Encoder`): each a text message."""

    __slots__ = ("_frame", "_id", "_offset", "spec")

    def __init__(self, socket: ApiSocket, spec: CompletionSpec, record_id: str, offset: int) -> None:
        self.spec = spec
        self._frame = socket.frame
        self._id = record_id
        self._offset = offset

    def _text(self, start: int, stop: int) -> str:
        return "".join(WORDS[(self._offset + i) % len(WORDS)] for i in range(start, stop))

    def start_events(self) -> bytes:
        """Nothing: vLLM's first event of a transcription is its first delta."""
        return b""

    def token_event(self, index: int) -> tuple[bytes, bytes]:
        """Token `index`'s delta, as (empty prefix, message)."""
        return b"", self.tokens_event(index, index + 1)

    def tokens_event(self, start: int, stop: int) -> bytes:
        """The delta carrying tokens `start` .. `stop - 1`: their words."""
        return self.text_event(self._text(start, stop))

    def text_event(self, text: str) -> bytes:
        """A delta carrying `text`."""
        return self._frame('{"type":"transcription.delta","delta":' + orjson.dumps(text).decode() + "}")

    def end_events(self) -> list[bytes]:
        """`transcription.done`: the whole text, its usage, the trace's id."""
        done = {"type": "transcription.done", "text": self._text(0, self.spec.output_tokens), "usage": usage(self.spec),
                "id": self._id}  # fmt: skip
        return [self._frame(orjson.dumps(done).decode())]

    def error_event(self, message: str) -> bytes:
        """An `error` event (a server error mid-transcription)."""
        return self._frame(orjson.dumps({"type": "error", "error": message, "code": "processing_error"}).decode())

    def body(self) -> bytes:
        """A transcription has no body: its events are its answer."""
        return b""


class _Transcription:
    """One vLLM realtime session on one WebSocket (see the module doc)."""

    def __init__(self, socket: ApiSocket, session_id: str) -> None:
        self.socket = socket
        self.id = session_id
        self.model: str | None = None  # set by session.update
        self.audio_bytes = 0  # appended since the last transcription
        self.open = False  # an utterance started (its first commit), not final yet
        self.responding = False

    def message(self, text: str, t_recv_s: float) -> None:
        """A client event (see the module doc); an `error` event when it cannot be taken."""
        try:
            try:
                data = orjson.loads(text)
            except orjson.JSONDecodeError:
                raise ApiError(400, "invalid_json", "Invalid JSON") from None
            kind = data.get("type") if isinstance(data, dict) else None
            if kind == "session.update":
                self._update(data)
            elif kind == "input_audio_buffer.append":
                self._append(data)
            elif kind == "input_audio_buffer.commit":
                self._commit(data, t_recv_s)
            else:
                raise ApiError(400, "unknown_event", f"Unknown event type: {kind}")
        except ApiError as exc:
            error = {"type": "error", "error": exc.message, "code": exc.type}
            self.socket.send(orjson.dumps(error).decode())

    def _update(self, data: dict[str, Any]) -> None:
        model = data.get("model")
        if model not in self.socket.served:
            raise ApiError(404, "model_not_found", f"The model `{model}` does not exist.")
        self.model = model

    def _append(self, data: dict[str, Any]) -> None:
        try:
            size = len(base64.b64decode(data.get("audio") or "", validate=True))
        except (binascii.Error, TypeError, ValueError):
            size = 0
        if not size:
            raise ApiError(400, "invalid_audio", "Invalid audio data")
        self.audio_bytes += size

    def _commit(self, data: dict[str, Any], t_recv_s: float) -> None:
        if self.model is None:
            raise ApiError(400, "model_not_validated", "Model not validated: send a session.update naming it first.")
        if self.responding:
            raise ApiError(400, "generation_in_progress", "a transcription is in progress already")
        if data.get("final") is not True:
            self.open = True
            return
        if not self.open:
            raise bad_request("no utterance under way: input_audio_buffer.commit starts one before its audio")
        if not self.audio_bytes:
            raise ApiError(400, "invalid_audio", "Can't process empty audio.")
        heard, self.audio_bytes, self.open = self.audio_bytes, 0, False
        tokens = round(heard / AUDIO_BYTES_PER_S * PROMPT_TOKENS_PER_S)
        spec = API.parse({"prompt_tokens": tokens, "model": self.model}, self.socket.natural_tokens)
        self.responding = True

        def events(spec: CompletionSpec, record_id: str, _created: int, _model: str, offset: int) -> Encoder:
            return _Deltas(self.socket, spec, record_id, offset)

        record = self.socket.generate(spec, events, t_recv_s, self._done)
        record.session = self.id
        record.answer = _Heard(heard)

    def _done(self, _record: TraceRecord) -> None:
        self.responding = False


def _speaks_vllm(text: str) -> bool:
    """Whether a session's first client event is vLLM's (see the module doc)."""
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    if not isinstance(data, dict):
        return False
    kind = data.get("type")
    return (kind == "session.update" and "session" not in data) or kind == "input_audio_buffer.commit"


class _Either:
    """A session at `/v1/realtime`: vLLM's or the OpenAI Realtime API's, as its first client event says."""

    def __init__(self, socket: ApiSocket) -> None:
        self._openai = realtime.API.websocket(socket)  # type: ignore[misc]  # (refuses a model it does not serve)
        self._vllm = _Transcription(socket, f"sess-{next(_sessions)}")
        self._socket = socket
        self._chosen: Any = None

    def start(self) -> None:
        """`session.created`: the OpenAI session object, vLLM's `id` and `created` beside it."""
        openai = self._openai
        created = openai.event("session.created", session=openai._session_object(), id=self._vllm.id,
                               created=int(time.time()))  # fmt: skip
        self._socket.send(created)

    def message(self, text: str, t_recv_s: float) -> None:
        """A client event, to the session its first event chose."""
        if self._chosen is None:
            self._chosen = self._vllm if _speaks_vllm(text) else self._openai
        self._chosen.message(text, t_recv_s)


def _by_session(*_args: Any) -> Encoder:
    """A transcription's events are made by its session (`_Transcription._commit`): no POST reaches this API."""
    raise ApiError(426, "BadRequestError", "/v1/realtime is served over WebSocket")


API = Api(
    name="vllm_realtime",
    paths=("/v1/realtime",),
    id_prefix="rt",
    parse=_parse,
    encoder=_by_session,
    websocket=_Either,
    serves_too=("realtime",),
)
