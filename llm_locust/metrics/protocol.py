"""What an OpenAI-compatible streaming chunk means for a `RequestRecord` (pure, no I/O).

Handles chat chunks (`choices[0].delta`: content, reasoning_content / reasoning, tool_calls)
and text-completion chunks (`choices[0].text`), usage-only chunks, `[DONE]`, and error
objects sent inside the stream (vLLM, SGLang, TGI and OpenAI all do this on mid-stream
failures). One JSON decode per event at most, nothing else allocated per token beyond one ITL
sample; `TokenChunks` skips the decode for the usual chunk of a stream (see there).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import orjson

from llm_locust.metrics.record import ErrorKind, RequestRecord, ToolCall
from llm_locust.metrics.sse import DEFAULT_MAX_EVENT_BYTES, SSEDecoder
from llm_locust.redact import redact

_DONE = b"[DONE]"
_MESSAGE_LIMIT = 200  # characters of server text kept in an error message
MAX_USAGE_TOKENS = 10_000_000
"""The most tokens a server's usage may count for one request (prompt, output or reasoning): 10x the longest
context windows served today. More is no answer to measure — a broken or hostile count — and fails the request as a
bad stream (`check_usage`) instead of reaching the throughput and the summary."""
_USAGE_COUNTS = (("usage_completion_tokens", "output"), ("prompt_tokens", "prompt"), ("reasoning_tokens", "reasoning"))


_STRING = re.compile(rb'"(?:[^"\\]|\\.)+"')
"""A non-empty JSON string literal (escapes included)."""
_CONTENT_KEY = b'"content":'


class TokenChunks:
    """One stream's usual token chunk, recognised without a JSON decode.

    Servers send every content token of a stream as the same bytes around a different content
    string: `{"id":"X",...,"choices":[{"index":0,"delta":{"content":"<text>"},...}]}`. After a
    decoded chunk that was exactly that — one choice, a delta with only a non-empty content
    string, no finish_reason, usage or error — the bytes before and after its content string are
    kept; a later chunk made of those same bytes around one non-empty JSON string literal means
    the same thing (a content token, nothing else), so it is applied without decoding. Any other
    chunk (a different id, a finish_reason, usage, per-chunk padding like OpenAI's obfuscation,
    an error) is decoded as usual.

    `match_event` goes one step further for the client's hot path: a piece of body that is
    exactly one such chunk framed as one SSE event (`data: <chunk>` and a blank line) is a
    content token, with no SSE decoding either.
    """

    __slots__ = ("_event_prefix", "_event_suffix", "_prefix", "_suffix")

    def __init__(self) -> None:
        self._prefix = self._suffix = b"\x00"  # matches no JSON chunk until one is learned
        self._event_prefix = self._event_suffix = b"\x00"

    def match(self, data: bytes) -> bool:
        """True when `data` is this stream's usual chunk around a non-empty content string."""
        prefix, suffix = self._prefix, self._suffix
        return (
            data.startswith(prefix)
            and data.endswith(suffix)
            and _STRING.fullmatch(data, len(prefix), len(data) - len(suffix)) is not None
        )

    def match_event(self, piece: bytes | bytearray) -> bool:
        """True when `piece` (body bytes, starting at an event boundary) is exactly one SSE event
        holding this stream's usual chunk around a non-empty content string."""
        prefix, suffix = self._event_prefix, self._event_suffix  # with the string's quotes
        start, stop = len(prefix), len(piece) - len(suffix)
        if not (start < stop and piece.startswith(prefix) and piece.endswith(suffix)):
            return False
        if piece.count(b'"', start, stop) == 0 and piece.find(b"\\", start, stop) < 0:
            return True  # the usual content: plain text, nothing escaped
        return _STRING.fullmatch(piece, start - 1, stop + 1) is not None

    def literal(self, piece: bytes | bytearray) -> bytes | bytearray:
        """The content string literal, quotes included, of a `piece` that `match_event` accepted."""
        return piece[len(self._event_prefix) - 1 : len(piece) - len(self._event_suffix) + 1]

    def learn(self, data: bytes, chunk: dict) -> None:
        """Keep the bytes around the content string of `data` (decoded: `chunk`) if it is a plain
        content-token chunk."""
        if chunk.get("usage") or "error" in chunk:
            return
        choices = chunk.get("choices")
        if type(choices) is not list or len(choices) != 1 or type(choices[0]) is not dict:
            return
        choice = choices[0]
        delta = choice.get("delta")
        if choice.get("finish_reason") is not None or type(delta) is not dict or len(delta) != 1:
            return
        content = delta.get("content")
        if type(content) is not str or not content or data.count(_CONTENT_KEY) != 1:
            return
        start = data.index(_CONTENT_KEY) + len(_CONTENT_KEY)
        string = _STRING.match(data, start)
        if string is not None:
            self._prefix, self._suffix = data[:start], data[string.end() :]
            self._event_prefix = b"data: " + data[: start + 1]  # up to the string's opening quote
            self._event_suffix = data[string.end() - 1 :] + b"\n\n"  # from its closing quote


EventApplier = Callable[[RequestRecord, bytes, float, "TokenChunks | None"], bool]
"""An API's meaning of one SSE data payload: `apply_event` here (chat and text completions), or another API's, in its
module of `apis/`; True when the stream is over for the client."""


class EventStream:
    """One response body's SSE events applied to its record, piece of body by piece of body.

    A piece that is exactly the stream's usual token event (see `TokenChunks.match_event`),
    arriving at an event boundary, is applied as a content token without any decoding; any
    other piece goes through the SSE decoder and `apply` (the API's event applier; only
    `apply_event` teaches `TokenChunks`, so other APIs always take the decoding path).
    `keep` (when given: `stream_text.StreamText.keep`) gets each event's data before it is applied — of the usual
    token event only its content string literal (`TokenChunks.literal`). A line or event over `max_event_bytes` raises
    `sse.EventTooLarge` from `feed`.
    """

    __slots__ = ("_apply", "_chunks", "_decoder", "_keep", "_record")

    def __init__(
        self,
        record: RequestRecord,
        apply: EventApplier | None = None,
        keep: Callable[[bytes], None] | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        self._record = record
        self._apply = apply or apply_event
        self._decoder = SSEDecoder(max_event_bytes)
        self._chunks = TokenChunks()
        self._keep = keep

    def feed(self, data: bytes | bytearray, t: float) -> bool:
        """Apply the events completed by `data` (arrived at `t`, perf_counter s); True once the
        stream is over for the client (as `apply_event`)."""
        if self._decoder.idle and self._chunks.match_event(data):
            apply_token(self._record, t)
            if self._keep is not None:
                self._keep(self._chunks.literal(data))
            return False
        record, chunks, apply, keep = self._record, self._chunks, self._apply, self._keep
        for event in self._decoder.feed(bytes(data), t):
            if keep is not None:
                keep(event.data)
            if apply(record, event.data, event.t, chunks):
                return True
        return False

    def flush(self, t: float) -> None:
        """End of the body at `t`: apply a last event that had no blank line after it."""
        for event in self._decoder.flush(t):
            if self._keep is not None:
                self._keep(event.data)
            if self._apply(self._record, event.data, event.t, None):
                return


def apply_event(record: RequestRecord, data: bytes, t: float, chunks: TokenChunks | None = None) -> bool:
    """Apply one SSE data payload that arrived at `t` (perf_counter s) to `record`; `chunks`
    (one per stream) recognises the stream's usual token chunk without decoding it.

    Returns True when the stream is over for the client: `[DONE]`, an error object, or a
    payload that is not a JSON object of the expected shape (the record is then marked failed).
    Never raises for any payload.
    """
    if chunks is not None and chunks.match(data):
        apply_token(record, t)
        return False
    if data == _DONE:
        record.saw_done = True
        return True
    chunk = decode_object(record, data)
    if chunk is None:
        return True
    if chunks is not None:
        chunks.learn(data, chunk)
    return apply_chunk(record, chunk, t)


def decode_object(record: RequestRecord, data: bytes) -> dict | None:
    """The JSON object in one SSE data payload; None (and `record` failed as a bad stream) when it is not one."""
    try:
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError:
        record.fail(ErrorKind.BAD_STREAM, f"stream chunk is not JSON: {_clip(data)}")
        return None
    if type(chunk) is not dict:
        record.fail(ErrorKind.BAD_STREAM, f"stream chunk is not a JSON object: {_clip(data)}")
        return None
    return chunk


def guarded(apply: Callable[[RequestRecord, dict, float], bool], record: RequestRecord, chunk: dict, t: float) -> bool:
    """`apply(record, chunk, t)`, with a field of an unexpected JSON type failing `record` as a bad stream (True)."""
    try:
        return apply(record, chunk, t)
    except (AttributeError, TypeError, KeyError, IndexError):  # a field of an unexpected JSON type
        record.fail(ErrorKind.BAD_STREAM, f"stream chunk has an unexpected shape: {_clip(str(chunk))}")
        return True


def apply_chunk(record: RequestRecord, chunk: dict, t: float) -> bool:
    """Apply one decoded chunk (a JSON object) that arrived at `t` (perf_counter s) to `record`.

    Returns True when the chunk ends the stream: an error object, or fields of an unexpected
    JSON type (the record is then marked failed).
    """
    return guarded(_apply_chunk, record, chunk, t)


def _apply_chunk(record: RequestRecord, chunk: dict, t: float) -> bool:
    """`apply_chunk` itself; raises on fields of unexpected types."""
    error = chunk.get("error")
    if error:
        record.fail(ErrorKind.STREAM_ERROR, f"error in stream: {error_text(error)}")
        return True
    if not record.server_request_id:  # (the usual case: known from an earlier chunk or the header)
        note_request_id(record, chunk.get("id"))
    choices = chunk.get("choices")
    if choices:
        choice = choices[0]
        delta = choice.get("delta")
        if delta is not None:  # chat completion chunk
            content = delta.get("content")
            calls = delta.get("tool_calls")
            bearing = content or calls
            if bearing or delta.get("reasoning_content") or delta.get("reasoning"):
                token_event(record, t)
                if bearing and record.t_first_content is None:
                    record.t_first_content = t
            if calls:
                _chat_tool_calls(record, calls, t)
        elif choice.get("text"):  # text completion chunk
            token_event(record, t)
            if record.t_first_content is None:
                record.t_first_content = t
        finish_reason = choice.get("finish_reason")
        if finish_reason:
            record.finish_reason = str(finish_reason)
    usage = chunk.get("usage")
    if usage:
        completion_tokens, prompt_tokens = usage.get("completion_tokens"), usage.get("prompt_tokens")
        if type(completion_tokens) is int and completion_tokens >= 0:
            record.usage_completion_tokens = completion_tokens
        if type(prompt_tokens) is int and prompt_tokens >= 0:
            record.prompt_tokens = prompt_tokens
        details = usage.get("completion_tokens_details")
        if details and type(details.get("reasoning_tokens")) is int:
            record.reasoning_tokens = details["reasoning_tokens"]
    return False


def note_request_id(record: RequestRecord, value: object) -> None:
    """Keep `value` (a response's `id` field) as the record's server request id, unless the server already gave one
    (its `x-request-id` header comes first) or `value` is not a non-empty string."""
    if not record.server_request_id and type(value) is str and value:
        record.server_request_id = value


def _chat_tool_calls(record: RequestRecord, entries: list, t: float) -> None:
    """Apply a chat delta's `tool_calls` entries that arrived at `t`: an entry whose `index` is new starts a tool call
    (its `id`, `function.name`, the first `function.arguments`), one of a call already started adds its arguments
    (and any name piece) to it."""
    for entry in entries:
        function = entry.get("function") or {}
        name, arguments = function.get("name") or "", function.get("arguments") or ""
        index = entry.get("index")
        if type(index) is not int or index >= len(record.tool_calls):
            start_tool_call(record, t, str(entry.get("id") or ""), str(name), str(arguments))
        else:
            add_tool_arguments(record, t, str(arguments), index, str(name), str(entry.get("id") or ""))


def start_tool_call(record: RequestRecord, t: float, call_id: str, name: str, arguments: str = "") -> None:
    """A new tool call of the answer began at `t` (perf_counter s): its id, function name and first arguments."""
    record.tool_calls += (ToolCall(call_id, name, arguments),)
    record.t_tool_call = t


def add_tool_arguments(
    record: RequestRecord, t: float, arguments: str, position: int = -1, name: str = "", call_id: str = ""
) -> None:
    """More of the tool call at `position` (default: the last one started) arrived at `t`: `arguments` (and a `name`
    piece) appended, its id set if it had none; nothing when no tool call was started."""
    calls = record.tool_calls
    if not calls:
        return
    call = calls[position]
    updated = ToolCall(call.id or call_id, call.name + name, call.arguments + arguments)
    position %= len(calls)
    record.tool_calls = (*calls[:position], updated, *calls[position + 1 :])
    record.t_tool_call = t


def set_tool_arguments(record: RequestRecord, t: float, arguments: str) -> None:
    """The whole arguments of the last tool call started (an API's closing event that repeats them) arrived at
    `t`; nothing when no tool call was started."""
    if record.tool_calls:
        call = record.tool_calls[-1]
        record.tool_calls = (*record.tool_calls[:-1], ToolCall(call.id, call.name, arguments))
        record.t_tool_call = t


def check_tool_calls(record: RequestRecord) -> None:
    """Fail `record` (`tool_call_json`) when one of its tool calls' arguments is not a JSON object (empty arguments
    are a call without any: the Messages API streams none for an empty input)."""
    for call in record.tool_calls:
        if not call.arguments:
            continue
        try:
            arguments = orjson.loads(call.arguments)
        except orjson.JSONDecodeError:
            arguments = None
        if type(arguments) is not dict:
            record.fail(
                ErrorKind.TOOL_CALL_JSON,
                f"the arguments of tool call {_clip(call.id or '?')} ({_clip(call.name)}) are not a JSON object: "
                f"{_clip(call.arguments)}",
            )
            return


def apply_token(record: RequestRecord, t: float) -> None:
    """Apply a content token (non-reasoning output: text or a tool call) that arrived at `t` (perf_counter s);
    also what a chunk matched by `TokenChunks` means."""
    token_event(record, t)
    if record.t_first_content is None:
        record.t_first_content = t


def token_event(record: RequestRecord, t: float) -> None:
    """Record the arrival of a token-bearing event (content or reasoning) at `t` (perf_counter s)."""
    if record.t_first is None:
        record.t_first = t
    else:
        record.itl_us.append(round((t - record.t_last) * 1e6))
    record.t_last = t
    record.events += 1


def finish(record: RequestRecord, t_done: float) -> RequestRecord:
    """Close the record at stream end (perf_counter s): classify an unfinished or empty stream, or one whose tool calls'
    arguments are not JSON objects."""
    record.t_done = t_done
    check_usage(record)
    if record.ok:
        if not record.saw_done and record.finish_reason is None:
            record.fail(
                ErrorKind.INCOMPLETE,
                "stream ended without its final event ([DONE], a finish_reason, response.completed or message_stop)",
            )
        elif record.events == 0:
            record.fail(ErrorKind.NO_TOKENS, "stream finished without any generated token")
        elif record.tool_calls:
            check_tool_calls(record)
    return record


def check_usage(record: RequestRecord) -> None:
    """Drop each usage count of `record` outside [0, `MAX_USAGE_TOKENS`] (nothing downstream ever sees it) and fail the
    request as a bad stream, naming it (a cancelled request stays cancelled)."""
    for field, words in _USAGE_COUNTS:
        value = getattr(record, field)
        if value is None or 0 <= value <= MAX_USAGE_TOKENS:
            continue
        setattr(record, field, None)
        if not record.cancelled:
            shown = value if value.bit_length() <= 64 else "over 2^64"
            record.fail(
                ErrorKind.BAD_STREAM,
                f"usage counts {shown} {words} tokens: not plausible for one request (at most {MAX_USAGE_TOKENS:,})",
            )


def error_text(error: object) -> str:
    """A short, single-line text for an OpenAI-style error object or message."""
    if isinstance(error, dict):
        error = error.get("message") or error.get("error") or error
    return _clip(error if isinstance(error, bytes | str) else str(error))


def _clip(text: bytes | str) -> str:
    """At most `_MESSAGE_LIMIT` characters of `text`, on one line, secrets redacted first (a secret
    cut in two by the limit would no longer be recognised)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = " ".join(redact(text).split())
    return text if len(text) <= _MESSAGE_LIMIT else text[:_MESSAGE_LIMIT] + "..."
