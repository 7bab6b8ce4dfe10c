"""vLLM's realtime transcription over WebSocket (`GET /v1/realtime`, upgraded; issue 44 item 3): a session of
utterances on one socket, each transcribed as it is heard, each one record.

vLLM serves it at the OpenAI Realtime API's path with its own events (`vllm/entrypoints/openai/realtime/`: a realtime
model such as Voxtral Realtime). On the handshake the server sends `session.created`. A turn: `session.update` naming
the model (`model=`: vLLM refuses a commit before one), `input_audio_buffer.commit` (the utterance starts), the
user's audio — 16 kHz 16-bit mono PCM in `input_audio_buffer.append` events of 0.1 s (`realtime.appends`), sent at
real-time pace (`audio_seconds` is the registry's `pace`: a second of audio takes a second to send, as from a
microphone) — and `input_audio_buffer.commit` with `final: true` (the audio is over). The record's `t_send` is the
hand-over of that last commit, right after the end of the audio: its TTFT is the time to first delta after the user
stopped speaking, its `input_s` the audio's seconds (audio seconds per second, the real-time factor).

The server's events, each a WebSocket text message read by the process's pump with its kernel receive time
(`transport.websocket`), are applied by `apply_event` (pure, never raises): each non-empty `transcription.delta` is a
token event — time to first delta and the gaps between deltas are the record's TTFT and ITL; a delta that arrived
before the end of the audio (a transcriber keeping up with the speaker) counts as arriving at it, its text and its
token kept —, `transcription.done` ends the turn with its `usage` (`prompt_tokens`, `completion_tokens`; finish
"stop"), its arrival the turn's end (E2E: the turn latency); an `error` event (`error`: its message, `code`) fails it
as `stream_error`; an event that is not a JSON object, or of fields of another JSON type, as `bad_stream`.

A scenario plays a session: `self.llm.vllm_realtime.connect()` (`runtime.socket_session`), then
`session.turn(audio=pcm, model=session.model)` for the first utterance and `session.turn(audio=pcm)` for the next
(`turn`: the events of one utterance). No HTTP request is built for it: its `shape` refuses.
"""

from __future__ import annotations

from typing import Any

from llm_locust.apis.realtime import appended_seconds, appends
from llm_locust.apis.registry import Api
from llm_locust.errors import ConfigError
from llm_locust.metrics.protocol import apply_token, decode_object, error_text, guarded, note_request_id
from llm_locust.metrics.record import ErrorKind, RequestRecord

PATH = "/v1/realtime"
AUDIO_BYTES_PER_S = 16_000 * 2
"""The user's audio's bytes per second: 16 kHz 16-bit mono PCM, as vLLM's realtime endpoint takes it."""
DELTA = "transcription.delta"
DONE = "transcription.done"


def apply_event(record: RequestRecord, data: bytes, t: float, _chunks: Any = None) -> bool:
    """Apply one server event (a text message's bytes) that arrived at `t` to the turn's `record`; True once the turn
    is over (`transcription.done`, an `error`, an event that is not a JSON object or of an unexpected shape)."""
    event = decode_object(record, data)
    return True if event is None else guarded(_apply, record, event, t)


def _apply(record: RequestRecord, event: dict, t: float) -> bool:
    kind = event.get("type")
    if kind == DELTA:
        text = event["delta"]
        if type(text) is not str:
            record.fail(ErrorKind.BAD_STREAM, f"{DELTA} without a text delta: {error_text(str(event))}")
            return True
        if text:
            apply_token(record, max(t, record.t_send))  # (heard before the audio's end: at its end)
        return False
    if kind == DONE:
        usage = event.get("usage") or {}
        completion, prompt = usage.get("completion_tokens"), usage.get("prompt_tokens")
        if type(completion) is int and completion >= 0:
            record.usage_completion_tokens = completion
        if type(prompt) is int and prompt >= 0:
            record.prompt_tokens = prompt
        note_request_id(record, event.get("id"))  # (the simulator's trace id; vLLM's event has none)
        record.finish_reason = "stop"
        record.saw_done = True
        return True
    if kind == "error":
        code = event.get("code")
        named = f"{code}: " if type(code) is str and code else ""
        record.fail(ErrorKind.STREAM_ERROR, f"error event: {named}{error_text(event.get('error'))}")
        return True
    return False


def event_text(event: dict) -> str | None:
    """A transcription delta's text (the answer kept, `--tokenizer`); None for any other event."""
    text = event.get("delta") if event.get("type") == DELTA else None
    return text if type(text) is str else None


def answer_parts(event: dict) -> tuple[str | None, str | None]:
    """(the answer's text, no reasoning) of one event."""
    return event_text(event), None


def session_update(model: str) -> dict[str, Any]:
    """The `session.update` event selecting `model` (vLLM's: the model at the top level)."""
    return {"type": "session.update", "model": model}


def audio_events(pcm: bytes) -> list[dict[str, Any]]:
    """One utterance of `pcm` (16 kHz 16-bit mono PCM): `input_audio_buffer.commit` (it starts), its
    `input_audio_buffer.append` events (`realtime.appends`: 0.1 s each, the last one shorter), then the final
    commit."""
    appended = appends(pcm, AUDIO_BYTES_PER_S)
    return [{"type": "input_audio_buffer.commit"}, *appended, {"type": "input_audio_buffer.commit", "final": True}]


def audio_seconds(event: dict[str, Any]) -> float:
    """The seconds of audio a client event carries (an `input_audio_buffer.append`'s; 0 for any other): sent at
    real-time pace (`Api.pace`)."""
    return appended_seconds(event, AUDIO_BYTES_PER_S)


def turn(fields: dict[str, Any]) -> list[dict[str, Any]]:
    """An utterance's client events: `session.update` first when `model` is given, then its `audio` (bytes of 16 kHz
    16-bit PCM, not empty: `audio_events`, streamed at real-time pace); TypeError for another field, ValueError
    without audio."""
    own = dict(fields)
    audio, model = own.pop("audio", None), own.pop("model", None)
    if own:
        raise TypeError(f"vllm_realtime turn(): unexpected {', '.join(sorted(own))} (audio=, model=)")
    if not audio:
        raise ValueError("vllm_realtime turn(): audio= is required: the utterance's 16 kHz 16-bit mono PCM bytes")
    return ([] if model is None else [session_update(str(model))]) + audio_events(bytes(audio))


def _shape(_body: dict[str, Any]) -> None:
    raise ConfigError(
        "vLLM's realtime transcription is a WebSocket session: self.llm.vllm_realtime.connect(), then session.turn(...)"
    )


API = Api(
    "vllm_realtime", "vLLM's realtime transcription", {"openai-compatible": PATH}, _shape, max_tokens_field="",
    forces_length=False, parser=apply_event, event_text=event_text, answer_parts=answer_parts, turn=turn,
    pace=audio_seconds,
)  # fmt: skip
