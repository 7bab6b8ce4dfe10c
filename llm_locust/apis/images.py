"""Image generation (`POST /v1/images/generations`): `prompt`, `size`, `n`, `quality`, answered as base64 images
(`b64_json`). Answered both ways, as the body asks (`Api.streams_body`):

- `stream: true` (with `partial_images` N, 0-3): SSE events typed as OpenAI's — `image_generation.partial_image`
  (`b64_json`, `partial_image_index`) N times per image, then `image_generation.completed` (`b64_json`, `usage`:
  `input_tokens`, `output_tokens`). Every event carrying an image is an output event: the first one (the first
  partial image, or the image itself without partial images) is the request's TTFT (and TTFO), the gaps between them
  its ITL; each `completed` counts one image (`RequestRecord.inputs`) and its decoded bytes (`output_bytes`, from
  the base64 text's length) and ends the stream for the record (its end closes it: several images each have theirs).
  An `error` event fails it (`stream_error`).
- otherwise one JSON body, `data: [{"b64_json"}, ...]` and `usage`: one image per entry (and its bytes); its latency
  is E2E.

What a run of it counts is images (`IMAGES`: images/s, bytes per image, output tok/s; TTFT, ITL and E2E). Pure, never
raises.
"""

from __future__ import annotations

from typing import Any

import orjson

from llm_locust.apis.registry import Api, Counting, Rate, openai_paths
from llm_locust.metrics.protocol import apply_token, check_usage, decode_object, error_text, guarded
from llm_locust.metrics.record import ErrorKind, RequestRecord

PARTIAL = "image_generation.partial_image"
COMPLETED = "image_generation.completed"
PARTIAL_IMAGES = 2
"""The partial images a built-in user asks for per image (`partial_images`; `--extra-body` changes it)."""

IMAGES = Counting(
    "images",
    (
        Rate("inputs_per_s", "images/s", "Images/s"),
        Rate("output_bytes_per_input", "bytes/image", "Bytes per image"),
        Rate("output_tokens_per_s", "output tok/s", "Output tokens/s"),
    ),
    (("ttft", "time to first image"), ("itl", "gap between images"), ("e2e", "Latency")),
)
"""An image-generation run: images per second (each request's images, `RequestRecord.inputs`), bytes per image (their
decoded bytes, `RequestRecord.output_bytes`) and output (image) tokens per second; time to the first (partial) image,
the gaps between images, E2E."""


def apply_event(record: RequestRecord, data: bytes, t: float, chunks: Any = None) -> bool:
    """Apply one image-generation stream event's data that arrived at `t` (perf_counter s) to `record` (`chunks`
    unused); True when the stream is over for the client (a failure)."""
    event = decode_object(record, data)
    return True if event is None else guarded(_apply, record, event, t)


def _apply(record: RequestRecord, event: dict, t: float) -> bool:
    """`apply_event` on the decoded event; raises on fields of unexpected types."""
    kind = event.get("type")
    if kind in (PARTIAL, COMPLETED):
        image = event["b64_json"]
        if type(image) is not str or not image:
            record.fail(ErrorKind.BAD_STREAM, f"{kind} event without an image: {error_text(event)}")
            return True
        apply_token(record, t)
        if kind == COMPLETED:
            record.inputs += 1
            record.output_bytes += decoded_bytes(image)
            _usage(record, event.get("usage"))
            record.finish_reason = "stop"
            record.saw_done = True
        return False
    if kind == "error" or "error" in event:
        record.fail(ErrorKind.STREAM_ERROR, f"error event: {error_text(event.get('error') or event)}")
        return True
    return False


def decoded_bytes(image: str) -> int:
    """The bytes a base64 text decodes to, from its length and padding (not decoded: exact for valid base64)."""
    return len(image) * 3 // 4 - (2 if image.endswith("==") else 1 if image.endswith("=") else 0)


def _usage(record: RequestRecord, usage: Any) -> None:
    """Take an images `usage` object's token counts onto `record` (the last one given wins)."""
    if not isinstance(usage, dict):
        return
    output_tokens, input_tokens = usage.get("output_tokens"), usage.get("input_tokens")
    if type(output_tokens) is int:
        record.usage_completion_tokens = output_tokens
    if type(input_tokens) is int:
        record.prompt_tokens = input_tokens


def read_images(content: bytes, record: RequestRecord, inputs: int) -> None:
    """Check an images response body (`data`: at least one `{"b64_json"}`), count its images and take its usage onto
    `record` (`inputs`, the texts a built-in user joined into its prompt, is not a count of images)."""
    try:
        data = orjson.loads(content)
        images = data["data"]
        usage = data.get("usage")
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        record.fail(ErrorKind.BAD_STREAM, f"images response is not an OpenAI images object: {error_text(content)}")
        return
    if type(images) is not list or not images:
        record.fail(ErrorKind.BAD_STREAM, f"images response holds no images: {error_text(content)}")
        return
    if not all(isinstance(image, dict) and type(image.get("b64_json")) is str and image["b64_json"]
               for image in images):  # fmt: skip
        record.fail(ErrorKind.BAD_STREAM, "images response holds an entry without b64_json")
        return
    record.inputs = len(images)
    record.output_bytes = sum(decoded_bytes(image["b64_json"]) for image in images)
    _usage(record, usage)
    check_usage(record)


def shape(body: dict[str, Any]) -> None:
    """Image generation, a built-in user's request: its prompt text(s) as `prompt`, streamed with `PARTIAL_IMAGES`
    partial images (a scenario's call sends its own fields)."""
    texts = body.pop("texts")
    body["prompt"] = " ".join(texts)
    body["stream"] = True
    body["partial_images"] = PARTIAL_IMAGES


API = Api(
    "images", "image generation", openai_paths("/v1/images/generations", azure="images/generations", databricks=False),
    shape, max_tokens_field="", forces_length=False, parser=apply_event, read_body=read_images, counting=IMAGES,
    mount="images.generate", user="ImagesUser",
)  # fmt: skip
