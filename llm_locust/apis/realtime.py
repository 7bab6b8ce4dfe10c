"""The OpenAI Realtime API over WebSocket (`GET /v1/realtime?model=...`, upgraded; issue 44 item 3): a session of
turns on one socket, each turn one record.

A turn: the client sends `conversation.item.create` (a user message of `input_text`; `user_item`) — or the user's
audio, `input_audio_buffer.append` events streamed at real-time pace (`audio_seconds` is the registry's `pace`: a
second of audio takes a second to send, as from a microphone) and `input_audio_buffer.commit` — and
`response.create` (`response_create`: its `max_output_tokens`); the record's `t_send` is the hand-over of
`response.create`, right after the end of the audio: its TTFT is the time to first delta after the user stopped
speaking, its `input_s` the audio's seconds (audio seconds per second, the real-time factor). The server's events,
each a WebSocket text message read by the process's pump with its kernel receive time (`transport.websocket`), are
applied by `apply_event` (pure, never raises): `response.created` names the response (the record's server id), each
non-empty `response.output_text.delta` (the beta's `response.text.delta`) is a token event — time to first delta and
the gaps between deltas are the record's TTFT and ITL —, `response.done` ends the turn with its `usage`
(`input_tokens`, `output_tokens`) and status (completed: finish "stop"; incomplete at `max_output_tokens`: "length"),
its arrival the turn's end (E2E: the turn latency); an `error` event fails it. Shapes and names as the openai SDK's
`openai.types.realtime`.

An answer in audio (the session's `output_modalities: ["audio"]`, asked with `session.update`; `response.create` asks
for none, so the session's rule; OpenAI's default is audio): each non-empty `response.output_audio.delta` (the beta's
`response.audio.delta`, base64 audio) is the output event — TTFT, ITL — and its bytes are counted; `response.done`
turns them into the record's `output_s` (`output_bytes` over the bytes per second of the response's
`audio.output.format`: `audio/pcm` 24 kHz 16-bit, `audio/pcmu` / `audio/pcma` 8 kHz 8-bit; the beta's `pcm16`,
`g711_ulaw`, `g711_alaw`; absent: pcm; another: not counted), the audio seconds produced (audio s/s, the real-time
factor). Its transcript's deltas (`response.output_audio_transcript.delta`, the beta's
`response.audio_transcript.delta`) are the answer's text, not output events.

A scenario plays a session: `self.llm.realtime.connect()` (`runtime.socket_session`), `session.turn(text=...,
audio=..., max_output_tokens=...)` (`turn`: the events of one turn). No HTTP request is built for it: its `shape`
refuses.
"""

from __future__ import annotations

import base64
from typing import Any

from llm_locust.apis.images import decoded_bytes
from llm_locust.apis.registry import Api
from llm_locust.errors import ConfigError
from llm_locust.metrics.protocol import apply_token, decode_object, error_text, guarded, note_request_id
from llm_locust.metrics.record import ErrorKind, RequestRecord

PATH = "/v1/realtime"
AUDIO_BYTES_PER_S = 24_000 * 2
"""The user's audio's bytes per second: 24 kHz 16-bit mono PCM (`pcm16`, the API's default input format)."""
AUDIO_CHUNK_S = 0.1
"""The audio each `input_audio_buffer.append` carries, seconds: a microphone's buffer."""
_DELTAS = frozenset({"response.output_text.delta", "response.text.delta"})
_AUDIO_DELTAS = frozenset({"response.output_audio.delta", "response.audio.delta"})
_TRANSCRIPT_DELTAS = frozenset({"response.output_audio_transcript.delta", "response.audio_transcript.delta"})
_TEXTS = _DELTAS | _TRANSCRIPT_DELTAS
OUTPUT_BYTES_PER_S = {"audio/pcm": 24_000 * 2, "pcm16": 24_000 * 2, "audio/pcmu": 8_000, "g711_ulaw": 8_000,
                      "audio/pcma": 8_000, "g711_alaw": 8_000}  # fmt: skip
"""An answer's audio bytes per second by its format's type (GA's `audio/...`, the beta's names): pcm 16-bit, G.711
8-bit."""


def apply_event(record: RequestRecord, data: bytes, t: float, _chunks: Any = None) -> bool:
    """Apply one server event (a text message's bytes) that arrived at `t` to the turn's `record`; True once the turn
    is over (`response.done`, an `error`, an event that is not a JSON object)."""
    event = decode_object(record, data)
    return True if event is None else guarded(_apply, record, event, t)


def _apply(record: RequestRecord, event: dict, t: float) -> bool:
    kind = event.get("type")
    if kind in _DELTAS:
        if event.get("delta"):
            apply_token(record, t)
        return False
    if kind in _AUDIO_DELTAS:
        audio = event["delta"]
        if type(audio) is not str:
            record.fail(ErrorKind.BAD_STREAM, f"{kind} without base64 audio: {error_text(event)}")
            return True
        if audio:
            apply_token(record, t)
            record.output_bytes += decoded_bytes(audio)
        return False
    if kind == "response.created":
        note_request_id(record, (event.get("response") or {}).get("id"))
        return False
    if kind == "response.done":
        response = event["response"]
        note_request_id(record, response.get("id"))
        usage = response.get("usage") or {}
        output_tokens, input_tokens = usage.get("output_tokens"), usage.get("input_tokens")
        if type(output_tokens) is int and output_tokens >= 0:
            record.usage_completion_tokens = output_tokens
        if type(input_tokens) is int and input_tokens >= 0:
            record.prompt_tokens = input_tokens
        status = response.get("status")
        reason = (response.get("status_details") or {}).get("reason")
        if status in ("failed", "cancelled"):
            record.fail(ErrorKind.STREAM_ERROR, f"response {status}: {error_text(response.get('status_details'))}")
        record.finish_reason = "length" if reason == "max_output_tokens" else "stop"
        if record.output_bytes:
            record.output_s = record.output_bytes / output_bytes_per_s(response)
        record.saw_done = True
        return True
    if kind == "error":
        record.fail(ErrorKind.STREAM_ERROR, f"error event: {error_text(event.get('error'))}")
        return True
    return False


def output_bytes_per_s(response: dict) -> float:
    """The bytes per second of a response's audio, as its `audio.output.format` names it (see the module doc; inf for
    a format whose seconds are not counted)."""
    form = ((response.get("audio") or {}).get("output") or {}).get("format") or "audio/pcm"
    kind = form if isinstance(form, str) else form.get("type")
    return OUTPUT_BYTES_PER_S.get(kind, float("inf"))  # type: ignore[arg-type]


def event_text(event: dict) -> str | None:
    """A text delta's or an audio transcript delta's text (the answer kept, `--tokenizer`); None for any other
    event."""
    return event.get("delta") if event.get("type") in _TEXTS else None


def answer_parts(event: dict) -> tuple[str | None, str | None]:
    """(the answer's text, no reasoning) of one event."""
    return event_text(event), None


def user_item(text: str) -> dict[str, Any]:
    """The `conversation.item.create` event of a user message of `text`."""
    content = [{"type": "input_text", "text": text}]
    return {"type": "conversation.item.create", "item": {"type": "message", "role": "user", "content": content}}


def response_create(max_output_tokens: int | None = None) -> dict[str, Any]:
    """The `response.create` event (text or audio as the session says; at most `max_output_tokens`, None: the
    session's)."""
    response: dict[str, Any] = {}
    if max_output_tokens is not None:
        response["max_output_tokens"] = max_output_tokens
    return {"type": "response.create", "response": response}


def appends(pcm: bytes, bytes_per_s: int) -> list[dict[str, Any]]:
    """Audio `pcm` of `bytes_per_s` as `input_audio_buffer.append` events of `AUDIO_CHUNK_S` each (the last one
    shorter): a microphone's buffers (vLLM's realtime transcription sends them too, at its own rate)."""
    size = int(bytes_per_s * AUDIO_CHUNK_S)
    return [{"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm[start : start + size]).decode()}
            for start in range(0, len(pcm), size)]  # fmt: skip


def appended_seconds(event: dict[str, Any], bytes_per_s: int) -> float:
    """The seconds of audio of `bytes_per_s` an `input_audio_buffer.append` event carries (0 for any other)."""
    if event.get("type") != "input_audio_buffer.append":
        return 0.0
    audio = event["audio"]
    return (len(audio) * 3 // 4 - audio[-2:].count("=")) / bytes_per_s


def audio_events(pcm: bytes) -> list[dict[str, Any]]:
    """The user's audio `pcm` (24 kHz 16-bit mono PCM, the API's default `pcm16`) as `input_audio_buffer.append`
    events (`appends`), then `input_audio_buffer.commit`."""
    return [*appends(pcm, AUDIO_BYTES_PER_S), {"type": "input_audio_buffer.commit"}]


def audio_seconds(event: dict[str, Any]) -> float:
    """The seconds of audio a client event carries (an `input_audio_buffer.append`'s; 0 for any other): sent at
    real-time pace (`Api.pace`)."""
    return appended_seconds(event, AUDIO_BYTES_PER_S)


def turn(fields: dict[str, Any]) -> list[dict[str, Any]]:
    """A turn's client events: its `audio` (bytes of `pcm16`: `audio_events`, streamed at real-time pace) and its
    `text` as a user message (none without either), then `response.create` (its `max_output_tokens`, else the
    session's); TypeError for another field."""
    own = dict(fields)
    text, audio = own.pop("text", None), own.pop("audio", None)
    max_output_tokens = own.pop("max_output_tokens", None)
    if own:
        raise TypeError(f"realtime turn(): unexpected {', '.join(sorted(own))} (text=, audio=, max_output_tokens=)")
    events = [] if audio is None else audio_events(bytes(audio))
    return events + ([] if text is None else [user_item(str(text))]) + [response_create(max_output_tokens)]


def _shape(_body: dict[str, Any]) -> None:
    raise ConfigError("the Realtime API is a WebSocket session: self.llm.realtime.connect(), then session.turn(...)")


API = Api(
    "realtime", "the Realtime API", {"openai-compatible": PATH, "openai": PATH}, _shape, max_tokens_field="",
    forces_length=False, parser=apply_event, event_text=event_text, answer_parts=answer_parts, turn=turn,
    pace=audio_seconds,
)  # fmt: skip
