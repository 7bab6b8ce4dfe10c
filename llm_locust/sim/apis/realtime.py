"""The OpenAI Realtime API over WebSocket (`GET /v1/realtime?model=...`, upgraded): a session of text turns.

On the handshake the server sends `session.created`. The client's events: `session.update` (`session.instructions`,
`session.max_output_tokens`: an integer or "inf"; answered by `session.updated`), `conversation.item.create` (a user
message, its `input_text` parts; answered by `conversation.item.added`), `input_audio_buffer.append` (base64 audio,
24 kHz 16-bit mono PCM as the API's default) and `input_audio_buffer.commit` (the audio becomes a user item: answered
by `input_audio_buffer.committed`), `response.create` (`response.max_output_tokens` over the session's). A response
is one generation of the simulator's timing model, received when the read bringing `response.create` arrived:
`response.created`, `response.output_item.added`, `response.content_part.added` at once, then one
`response.output_text.delta` per token at its due time (the trace's `token_times`), then `response.output_text.done`,
`response.content_part.done`, `response.output_item.done` and `response.done` with `usage` (`input_tokens`,
`output_tokens`, `total_tokens`; status "incomplete", reason "max_output_tokens", when cut there). Its answer joins
the conversation: a turn's prompt is the words of every item before it (an audio item: one token per second of audio,
at least 1). The event names and shapes are the openai SDK's (`openai.types.realtime`). A client event the server
cannot take is answered by an `error` event; the session goes on. The trace's `session` is the session's id.

A response in audio — `output_modalities: ["audio"]` in `session.update` or `response.create` (the simulator's default
is text; OpenAI's is audio); `audio.output.format` must be 24 kHz `audio/pcm`, the only one it writes — has the same
timing: each token is `AUDIO_CHUNK_S` of audio (silence, 24 kHz 16-bit PCM), written as its transcript's
`response.output_audio_transcript.delta` (the token's word) and its `response.output_audio.delta` (the audio, base64)
in one write; then `response.output_audio.done`, `response.output_audio_transcript.done` and the rest, `response.done`
naming the format (`audio.output.format`) and counting the tokens as audio (`output_token_details.audio_tokens`). The
trace's `answer` is `{"kind": "audio", "audio_s", "format", "audio_bytes"}`: the audio the response carries in full.
"""

from __future__ import annotations

import base64
import binascii
from itertools import count
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import orjson

from llm_locust.sim.apis.wire import Api, ApiError, CompletionSpec, Encoder, bad_request, output_length, usage
from llm_locust.sim.words import WORDS

if TYPE_CHECKING:  # (sim.websocket imports this package's registry)
    from llm_locust.sim.trace import TraceRecord
    from llm_locust.sim.websocket import ApiSocket

AUDIO_BYTES_PER_S = 24_000 * 2
"""The input audio's bytes per second: 24 kHz 16-bit mono PCM (`pcm16`, the API's default format)."""
AUDIO_CHUNK_S = 0.1
"""The audio of one output token of an answer in audio, seconds."""
AUDIO_FORMAT = {"type": "audio/pcm", "rate": 24_000}
"""The one audio format the simulator takes and writes."""
_CHUNK_BYTES = round(AUDIO_BYTES_PER_S * AUDIO_CHUNK_S)
_CHUNK = base64.b64encode(bytes(_CHUNK_BYTES)).decode()  # one token's audio: silence
_sessions = count(1)


def _parse(data: dict[str, Any], natural_tokens: int) -> CompletionSpec:
    """A response's spec from `data`: the conversation's words (`prompt_tokens`) and the turn's maximum
    (`max_output_tokens`, None: none)."""
    max_tokens = data.get("max_output_tokens")
    n = output_length({}, max_tokens, natural_tokens)
    return CompletionSpec(
        stream=True,
        include_usage=True,
        prompt_tokens=max(data["prompt_tokens"], 1),
        output_tokens=n,
        finish_reason="length" if n == max_tokens else "stop",
        max_tokens=max_tokens,
        model=data["model"],
        endpoint="realtime",
    )


def _modalities(value: Any, default: tuple[str, ...]) -> tuple[str, ...]:
    """An `output_modalities` value: ["text"] or ["audio"]; absent: `default`; ApiError else."""
    if value is None:
        return default
    if value not in (["text"], ["audio"]):
        raise bad_request(f"output_modalities must be ['text'] or ['audio'], got {value!r}")
    return tuple(value)


def _check_audio(config: Any) -> None:
    """An `audio` configuration's output format: 24 kHz `audio/pcm` or none; ApiError else."""
    output = config.get("output") if isinstance(config, dict) else None
    form = output.get("format") if isinstance(output, dict) else None
    pcm = isinstance(form, dict) and form.get("type") == "audio/pcm" and form.get("rate", 24_000) == 24_000
    if form is not None and not pcm:
        raise bad_request(f"the simulator writes only 24 kHz audio/pcm, not {form!r}")


class _Audio:
    """The audio a response carries (`wire.Scripted`, `kind` None: nothing the simulator's metrics count by kind), for
    the trace: `tokens` chunks of `AUDIO_CHUNK_S`."""

    __slots__ = ("tokens",)

    kind = None
    pieces: tuple[str, ...] = ()

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens

    def settle(self, batch: int) -> None:
        """Nothing to decide: the audio is known from the request."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form served by /sim/trace: the audio's seconds, its format and its bytes."""
        return {"kind": "audio", "audio_s": self.tokens * _CHUNK_BYTES / AUDIO_BYTES_PER_S, "format": "audio/pcm",
                "audio_bytes": self.tokens * _CHUNK_BYTES}  # fmt: skip


def _max_tokens(value: Any, default: int | None) -> int | None:
    """A `max_output_tokens` value: an integer ≥ 1, "inf" (None: no maximum), absent (`default`); ApiError else."""
    if value is None:
        return default
    if value == "inf":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise bad_request(f"max_output_tokens must be an integer of at least 1 or 'inf', got {value!r}")
    return value


class _Events:
    """The server events of one response on a WebSocket (the simulator's `Encoder`): each a text message; an answer in
    text, or in `audio` (the module doc)."""

    __slots__ = ("_audio", "_frame", "_head", "_item", "_offset", "_response", "_session", "_words", "spec")

    def __init__(self, session: _Session, spec: CompletionSpec, response_id: str, offset: int, audio: bool) -> None:
        self.spec = spec
        self._session = session
        self._frame = session.socket.frame
        self._response = response_id
        self._item = f"item_{response_id}"
        self._offset = offset
        self._audio = audio
        ids = f'"response_id":"{response_id}","item_id":"{self._item}","output_index":0,"content_index":0,"event_id":"'
        kinds = ("response.output_audio.delta", "response.output_audio_transcript.delta") if audio else (
            "response.output_text.delta", "")  # fmt: skip
        self._head = f'{{"type":"{kinds[0]}",{ids}'
        self._words = f'{{"type":"{kinds[1]}",{ids}'

    def _event(self, kind: str, **fields: Any) -> bytes:
        return self._frame(self._session.event(kind, **fields))

    def _ids(self) -> dict[str, Any]:
        return {"response_id": self._response, "item_id": self._item, "output_index": 0, "content_index": 0}

    def _text(self, start: int, stop: int) -> str:
        return "".join(WORDS[(self._offset + i) % len(WORDS)] for i in range(start, stop))

    def _part(self, text: str) -> dict[str, Any]:
        return {"type": "audio", "transcript": text} if self._audio else {"type": "output_text", "text": text}

    def start_events(self) -> bytes:
        """`response.created`, `response.output_item.added`, `response.content_part.added`."""
        response = {"id": self._response, "object": "realtime.response", "status": "in_progress", "output": []}
        item = {"id": self._item, "type": "message", "role": "assistant", "status": "in_progress", "content": []}
        return (
            self._event("response.created", response=response)
            + self._event("response.output_item.added", response_id=self._response, output_index=0, item=item)
            + self._event("response.content_part.added", **self._ids(), part=self._part(""))
        )

    def token_event(self, index: int) -> tuple[bytes, bytes]:
        """Token `index`'s delta(s), as (empty prefix, messages)."""
        return b"", self.tokens_event(index, index + 1)

    def tokens_event(self, start: int, stop: int) -> bytes:
        """The delta carrying tokens `start` .. `stop - 1`: their text; in audio, their transcript's and their
        audio's."""
        if not self._audio:
            return self.text_event(self._text(start, stop))
        words = self._delta(self._words, self._text(start, stop))
        return words + self._frame(self._head + self._session.next_event_id() + '","delta":"' + _CHUNK * (stop - start)
                                   + '"}')  # fmt: skip

    def _delta(self, head: str, text: str) -> bytes:
        return self._frame(head + self._session.next_event_id() + '","delta":' + orjson.dumps(text).decode() + "}")

    def text_event(self, text: str) -> bytes:
        """A delta carrying `text` (in audio: `text`'s bytes as the audio, the huge-chunk fault's)."""
        if self._audio:
            text = base64.b64encode(text.encode()).decode()
        return self._delta(self._head, text)

    def end_events(self) -> list[bytes]:
        """The response's end: the text (or the audio and its transcript), part and item done, then `response.done`
        with its usage."""
        spec = self.spec
        text = self._text(0, spec.output_tokens)
        cut = spec.finish_reason == "length"
        content = {"type": "output_audio", "transcript": text} if self._audio else {"type": "output_text", "text": text}
        item = {"id": self._item, "type": "message", "role": "assistant", "status": "incomplete" if cut else
                "completed", "content": [content]}  # fmt: skip
        counted = usage(spec)
        response = {
            "id": self._response,
            "object": "realtime.response",
            "status": "incomplete" if cut else "completed",
            "status_details": {"type": "incomplete", "reason": "max_output_tokens"} if cut else None,
            "output": [item],
            "usage": {"input_tokens": counted["prompt_tokens"], "output_tokens": counted["completion_tokens"],
                      "total_tokens": counted["total_tokens"]},
        }  # fmt: skip
        self._session.answered(text)
        if self._audio:
            response["output_modalities"] = ["audio"]
            response["audio"] = {"output": {"format": AUDIO_FORMAT}}
            response["usage"]["output_token_details"] = {"text_tokens": 0, "audio_tokens": spec.output_tokens}
            done = [self._event("response.output_audio.done", **self._ids()),
                    self._event("response.output_audio_transcript.done", **self._ids(), transcript=text)]  # fmt: skip
        else:
            done = [self._event("response.output_text.done", **self._ids(), text=text)]
        return [
            *done,
            self._event("response.content_part.done", **self._ids(), part=self._part(text)),
            self._event("response.output_item.done", response_id=self._response, output_index=0, item=item),
            self._event("response.done", response=response),
        ]

    def error_event(self, message: str) -> bytes:
        """An `error` event (a server error)."""
        return self._event("error", error={"type": "server_error", "message": message})

    def body(self) -> bytes:
        """A realtime response has no body: its events are its answer."""
        return b""


class _Session:
    """One realtime session on one WebSocket (see the module doc)."""

    def __init__(self, socket: ApiSocket) -> None:
        self.socket = socket
        query = parse_qs(socket.query)
        model = (query.get("model") or [socket.served[0]])[0]
        if model not in socket.served:
            raise ApiError(404, "NotFoundError", f"The model `{model}` does not exist.")
        self.model = model
        self.id = f"sess_{next(_sessions)}"
        self.instructions = ""
        self.max_tokens: int | None = None
        self.modalities: tuple[str, ...] = ("text",)
        self.words = 0  # the conversation's: every item's words
        self.audio_bytes = 0  # appended to the input audio buffer, not committed yet
        self.responding = False
        self._event_ids = count(1)
        self._items = count(1)

    def next_event_id(self) -> str:
        """A new server event id."""
        return f"event_{next(self._event_ids)}"

    def event(self, kind: str, **fields: Any) -> str:
        """A server event of type `kind` with `fields`, as its text."""
        return orjson.dumps({"type": kind, "event_id": self.next_event_id(), **fields}).decode()

    def _session_object(self) -> dict[str, Any]:
        return {
            "type": "realtime",
            "object": "realtime.session",
            "id": self.id,
            "model": self.model,
            "output_modalities": list(self.modalities),
            "audio": {"output": {"format": AUDIO_FORMAT}},
            "instructions": self.instructions,
            "max_output_tokens": "inf" if self.max_tokens is None else self.max_tokens,
        }

    def start(self) -> None:
        """`session.created`."""
        self.socket.send(self.event("session.created", session=self._session_object()))

    def message(self, text: str, t_recv_s: float) -> None:
        """A client event (see the module doc); an `error` event when it cannot be taken."""
        event_id = None
        try:
            try:
                data = orjson.loads(text)
            except orjson.JSONDecodeError as exc:
                raise bad_request(f"the event is not valid JSON: {exc}") from None
            if not isinstance(data, dict):
                raise bad_request("an event must be a JSON object")
            event_id = data.get("event_id")
            handler = _HANDLERS.get(data.get("type"))  # type: ignore[arg-type]
            if handler is None:
                raise bad_request(f"unknown event type {data.get('type')!r}")
            handler(self, data, t_recv_s)
        except ApiError as exc:
            error = {"type": "invalid_request_error", "code": exc.type, "message": exc.message, "event_id": event_id}
            self.socket.send(self.event("error", error=error))

    def _update(self, data: dict[str, Any], _t: float) -> None:
        session = data.get("session")
        if not isinstance(session, dict):
            raise bad_request("session.update needs a 'session' object")
        if isinstance(session.get("instructions"), str):
            self.instructions = session["instructions"]
        _check_audio(session.get("audio"))
        modalities = _modalities(session.get("output_modalities"), self.modalities)
        self.max_tokens = _max_tokens(session.get("max_output_tokens"), self.max_tokens)
        self.modalities = modalities
        self.socket.send(self.event("session.updated", session=self._session_object()))

    def _create_item(self, data: dict[str, Any], _t: float) -> None:
        item = data.get("item")
        if not isinstance(item, dict) or item.get("type", "message") != "message":
            raise bad_request("conversation.item.create needs a message 'item'")
        content = item.get("content")
        if not isinstance(content, list):
            raise bad_request("the item's 'content' must be a list of parts")
        texts = [part.get("text") for part in content if isinstance(part, dict)]
        self.words += sum(len(text.split()) for text in texts if isinstance(text, str))
        added = {**item, "id": item.get("id") or f"item_{self.id}_{next(self._items)}", "status": "completed"}
        self.socket.send(self.event("conversation.item.added", previous_item_id=None, item=added))

    def _append(self, data: dict[str, Any], _t: float) -> None:
        try:
            self.audio_bytes += len(base64.b64decode(data.get("audio") or "", validate=True))
        except (binascii.Error, TypeError):
            raise bad_request("input_audio_buffer.append needs base64 'audio'") from None

    def _commit(self, _data: dict[str, Any], _t: float) -> None:
        if not self.audio_bytes:
            raise bad_request("the input audio buffer is empty")
        self.words += max(1, round(self.audio_bytes / AUDIO_BYTES_PER_S))
        self.audio_bytes = 0
        item_id = f"item_{self.id}_{next(self._items)}"
        self.socket.send(self.event("input_audio_buffer.committed", previous_item_id=None, item_id=item_id))

    def _respond(self, data: dict[str, Any], t_recv_s: float) -> None:
        if self.responding:
            raise ApiError(400, "conversation_already_has_active_response", "a response is in progress already")
        response = data.get("response") or {}
        if not isinstance(response, dict):
            raise bad_request("'response' must be an object")
        max_tokens = _max_tokens(response.get("max_output_tokens"), self.max_tokens)
        _check_audio(response.get("audio"))
        audio = _modalities(response.get("output_modalities"), self.modalities) == ("audio",)
        request = {"prompt_tokens": self.words + len(self.instructions.split()), "max_output_tokens": max_tokens,
                   "model": self.model}  # fmt: skip
        spec = API.parse(request, self.socket.natural_tokens)
        self.responding = True

        def events(spec: CompletionSpec, response_id: str, _created: int, _model: str, offset: int) -> _Events:
            made = _Events(self, spec, response_id, offset, audio)
            self.socket.transport.write(made.start_events())
            return made

        record = self.socket.generate(spec, events, t_recv_s, self._done)
        record.session = self.id
        if audio:
            record.answer = _Audio(spec.output_tokens)

    def answered(self, text: str) -> None:
        """The response under way has answered `text`: it joins the conversation."""
        self.words += len(text.split())

    def _done(self, _record: TraceRecord) -> None:
        self.responding = False


def _by_session(*_args: Any) -> Encoder:
    """A response's events are made by its session (`_Session._respond`): no POST reaches this API (`websocket`)."""
    raise ApiError(426, "BadRequestError", "/v1/realtime is served over WebSocket")


_HANDLERS = {
    "session.update": _Session._update,
    "conversation.item.create": _Session._create_item,
    "input_audio_buffer.append": _Session._append,
    "input_audio_buffer.commit": _Session._commit,
    "response.create": _Session._respond,
}

API = Api(
    name="realtime",
    paths=("/v1/realtime",),
    id_prefix="resp",
    parse=_parse,
    encoder=_by_session,
    websocket=_Session,
)
