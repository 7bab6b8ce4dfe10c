"""Image generation (`POST /v1/images/generations`): its request and its synthetic images, streamed or whole.

The request: a non-empty `prompt` (its words are the prompt tokens), `size` ("WxH" or "auto": 1024x1024), `n` (1-10
images), `quality`, `response_format` (`b64_json` only: the simulator hosts no URLs), `stream` and `partial_images`
(0-3). Each image is `image_bytes(size)` bytes — a PNG signature and a fixed pattern, the same for every image of a
size — sent base64 as `b64_json`.

Each image is generated as `partial_images` + 1 "tokens" at the server's timing (TTFT, then one ITL apart): streamed,
each partial image is an `image_generation.partial_image` event (`b64_json`, `partial_image_index`, `size`,
`quality`, `background`, `output_format`, `created_at`), each image's last token its `image_generation.completed`
event (`b64_json` and `usage`: `input_tokens` the prompt's words, `output_tokens` the request's tokens), as OpenAI
streams them; the stream ends after the last image. Not streamed, one token per image and one JSON body once all
are done: `created`, `data: [{"b64_json"}, ...]`, `usage`. The trace's `completion_tokens` and `token_times` are
these tokens: the partial images' and images' write times. A mid-stream failure is an `error` event.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson

from llm_locust.sim.apis.wire import Api, CompletionSpec, bad_request, optional_int, prompt_words

_SIZE = re.compile(r"([1-9]\d{1,4})x([1-9]\d{1,4})")
DEFAULT_SIZE = "1024x1024"
PIXELS_PER_BYTE = 64
"""A synthetic image of W x H pixels is W * H / 64 bytes (1024x1024: 16 KiB): `image_bytes`."""
MAX_IMAGES, MAX_PARTIAL_IMAGES = 10, 3
_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def image_bytes(size: str) -> int:
    """The bytes of each synthetic image of `size` ("WxH"; "auto" is `DEFAULT_SIZE`)."""
    width, height = (int(side) for side in _SIZE.fullmatch(DEFAULT_SIZE if size == "auto" else size).groups())  # type: ignore[union-attr]
    return max(width * height // PIXELS_PER_BYTE, len(_SIGNATURE))


@lru_cache(maxsize=16)
def _b64(size: str) -> str:
    """The base64 text of the synthetic image of `size` (made once per size)."""
    n = image_bytes(size)
    pattern = bytes(range(256)) * (n // 256 + 1)
    return base64.b64encode(_SIGNATURE + pattern[: n - len(_SIGNATURE)]).decode()


@dataclass(frozen=True, slots=True)
class ImageSpec(CompletionSpec):
    """An image request's spec: its images (`inputs`), their `size` and `quality`, the partial images per image."""

    size: str = DEFAULT_SIZE
    quality: str = "auto"
    partial_images: int = 0


def parse(data: dict[str, Any], natural_tokens: int) -> CompletionSpec:
    """The spec of an image-generation request `data` (ApiError if it is unacceptable); `natural_tokens` is not
    used: an image is `partial_images` + 1 tokens streamed (1 not streamed)."""
    prompt = data.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise bad_request("'prompt' must be a non-empty string")
    size = data.get("size") or "auto"
    if not isinstance(size, str) or (size != "auto" and _SIZE.fullmatch(size) is None):
        raise bad_request(f"'size' must be 'auto' or WIDTHxHEIGHT, got {size!r}")
    n, partial = optional_int(data, "n"), optional_int(data, "partial_images") or 0
    n = 1 if n is None else n
    if not 1 <= n <= MAX_IMAGES:
        raise bad_request(f"'n' must be between 1 and {MAX_IMAGES}, got {n}")
    if not 0 <= partial <= MAX_PARTIAL_IMAGES:
        raise bad_request(f"'partial_images' must be between 0 and {MAX_PARTIAL_IMAGES}, got {partial}")
    if data.get("response_format") not in (None, "b64_json"):
        raise bad_request("'response_format' must be b64_json: this simulator hosts no image URLs")
    quality = data.get("quality") or "auto"
    if not isinstance(quality, str):
        raise bad_request(f"'quality' must be a string, got {quality!r}")
    stream = data.get("stream") is True
    tokens = n * (partial + 1) if stream else n
    return ImageSpec(stream=stream, include_usage=True, prompt_tokens=max(prompt_words(prompt), 1),
                     output_tokens=tokens, finish_reason="stop", prompt_text=prompt, inputs=n,
                     size=size, quality=quality, partial_images=partial if stream else 0)  # fmt: skip


class ImagesEncoder:
    """The events, or the body, of one image-generation response (see the module docstring)."""

    __slots__ = ("_created_s", "_fields", "spec")

    def __init__(self, spec: CompletionSpec, response_id: str, created_s: int, model: str, offset: int) -> None:
        self.spec: ImageSpec = spec  # type: ignore[assignment]  # `parse` made it
        self._created_s = created_s
        size = DEFAULT_SIZE if self.spec.size == "auto" else self.spec.size
        self._fields = {"created_at": created_s, "size": size, "quality": self.spec.quality, "background": "opaque",
                        "output_format": "png"}  # fmt: skip

    def _usage(self) -> dict[str, Any]:
        spec = self.spec
        return {"input_tokens": spec.prompt_tokens, "output_tokens": spec.output_tokens,
                "total_tokens": spec.prompt_tokens + spec.output_tokens,
                "input_tokens_details": {"text_tokens": spec.prompt_tokens, "image_tokens": 0}}  # fmt: skip

    def _event(self, index: int) -> bytes:
        """Token `index`'s event: a partial image, or (each image's last) the image's `completed` event."""
        per_image = self.spec.partial_images + 1
        part = index % per_image
        image = _b64(self.spec.size)
        if part < per_image - 1:
            kind, data = "image_generation.partial_image", {"b64_json": image, "partial_image_index": part}
        else:
            kind, data = "image_generation.completed", {"b64_json": image, "usage": self._usage()}
        return b"event: %b\ndata: %b\n\n" % (kind.encode(), orjson.dumps({"type": kind, **data, **self._fields}))

    def start_events(self) -> bytes:
        """No events before the first partial image."""
        return b""

    def token_event(self, index: int) -> tuple[bytes, bytes]:
        """Token `index`'s event as (empty prefix, event)."""
        return b"", self._event(index)

    def tokens_event(self, start: int, stop: int) -> bytes:
        """The events of tokens `start` .. `stop - 1`, written together (`--tokens-per-chunk`)."""
        return b"".join(self._event(index) for index in range(start, stop))

    def text_event(self, text: str) -> bytes:
        """A partial-image event carrying `text` as its image (the huge-chunk fault's)."""
        event = {"type": "image_generation.partial_image", "b64_json": text, "partial_image_index": 0}
        return b"event: image_generation.partial_image\ndata: %b\n\n" % orjson.dumps(event)

    def end_events(self) -> list[bytes]:
        """Nothing after the last image's `completed` event."""
        return []

    def error_event(self, message: str) -> bytes:
        """An `error` event (a mid-stream failure)."""
        error = {"type": "server_error", "code": "server_error", "message": message}
        return b"event: error\ndata: %b\n\n" % orjson.dumps({"type": "error", "error": error})

    def body(self) -> bytes:
        """The non-streamed response: `created`, one `{"b64_json"}` per image, `usage`."""
        images = [{"b64_json": _b64(self.spec.size)} for _ in range(self.spec.inputs)]
        size = self._fields["size"]
        return orjson.dumps({"created": self._created_s, "data": images, "usage": self._usage(), "size": size,
                             "quality": self.spec.quality, "background": "opaque", "output_format": "png"})  # fmt: skip


API = Api(
    name="images",
    paths=("/v1/images/generations", "/openai/deployments/{deployment}/images/generations"),  # OpenAI's, Azure's
    id_prefix="img",
    parse=parse,
    encoder=ImagesEncoder,
    request_id_header="x-request-id",  # its events carry no id: the header names the request, as OpenAI's does
)
