"""Image generation (`apis.images`, `sim.apis.images`): the stream's partial and completed images fed as SSE bytes
split anywhere, hostile and fuzzed events that never raise, the JSON body's reader, the built-in request, the
simulator's request checks and its events read back by the client's parser (pure: no runner, no server)."""

from __future__ import annotations

import base64
import json

import orjson
import pytest
from conftest import options
from hypothesis import given
from hypothesis import strategies as st

from llm_locust.apis import APIS, COUNTINGS
from llm_locust.apis import images as images_api
from llm_locust.config.settings import Settings
from llm_locust.metrics.protocol import EventStream, finish
from llm_locust.metrics.record import ErrorKind, RequestRecord, TokenSource
from llm_locust.sim.apis import images as sim_images
from llm_locust.sim.apis import parse_request
from llm_locust.sim.apis.wire import ApiError
from llm_locust.workload.builder import Workload

IMAGE = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(40)).decode()
USAGE = {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10}


def typed(kind: str, **data: object) -> bytes:
    """One typed SSE event, as OpenAI streams images."""
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


def partial(index: int) -> bytes:
    return typed(images_api.PARTIAL, b64_json=IMAGE, partial_image_index=index, size="1024x1024")


def completed(usage: dict | None = USAGE) -> bytes:
    return typed(images_api.COMPLETED, b64_json=IMAGE, usage=usage, size="1024x1024")


def run(events: list[tuple[bytes, float]], split: int | None = None) -> RequestRecord:
    """A record fed `events` (bytes, arrival s) through an `EventStream`, each split at byte `split` (None: whole),
    then the body's end at 9 s."""
    record = RequestRecord(endpoint="images", t_send=0.0)
    stream = EventStream(record, images_api.apply_event)
    for data, t in events:
        pieces = [data] if split is None else [data[:split], data[split:]]
        if any([stream.feed(piece, t) for piece in pieces if piece]):
            break
    stream.flush(9.0)
    return finish(record, 9.0)


TWO_PARTIALS = [(partial(0), 0.1), (partial(1), 0.15), (completed(), 0.3)]


@pytest.mark.parametrize("split", [None, 1, 6, 30, -40, -2, -1])
def test_first_partial_image_is_the_first_output_and_each_image_an_itl_sample(split):
    """Split anywhere (mid `event:`, mid base64, between the blank line's newlines), the same record: TTFT = TTFO =
    the first partial image, the gaps to the next partial and to the image are ITL samples, one image counted, the
    usage's tokens taken."""
    record = run(TWO_PARTIALS, split)
    assert record.ok and record.saw_done and record.finish_reason == "stop" and record.inputs == 1
    assert record.output_bytes == 48  # the image's decoded bytes (the partial images are not counted)
    assert record.ttft_s == pytest.approx(0.1) and record.ttfo_s == pytest.approx(0.1)
    assert record.e2e_s == pytest.approx(0.3) and record.events == 3 and list(record.itl_us) == [50_000, 150_000]
    assert (record.output_tokens, record.prompt_tokens, record.token_source) == (3, 7, TokenSource.USAGE)


def test_several_images_each_counted_and_the_stream_s_end_ends_it():
    events = [(partial(0), 0.1), (completed(), 0.2), (partial(0), 0.3), (completed({"output_tokens": 4}), 0.4)]
    record = run(events)
    assert record.ok and record.inputs == 2 and record.events == 4 and record.output_tokens == 4
    assert record.output_bytes == 2 * 48
    without_partials = run([(completed(None), 0.25)])
    assert without_partials.ok and without_partials.ttft_s == pytest.approx(0.25) and without_partials.inputs == 1
    assert without_partials.token_source == TokenSource.EVENTS and without_partials.prompt_tokens is None


def test_a_stream_cut_before_its_image_is_incomplete_and_an_error_event_fails_it():
    cut = run([(partial(0), 0.1), (partial(1), 0.2)])
    assert cut.error_kind == ErrorKind.INCOMPLETE and cut.inputs == 0
    error = typed("error", error={"type": "server_error", "code": "server_error", "message": "GPU fell over"})
    failed = run([(partial(0), 0.1), (error, 0.2), (completed(), 0.3)])
    assert failed.error_kind == ErrorKind.STREAM_ERROR and "GPU fell over" in failed.error_message


@pytest.mark.parametrize("hostile", [
    b"data: {not json\n\n",
    b"data: [1, 2]\n\n",
    typed(images_api.PARTIAL, b64_json=None),
    typed(images_api.PARTIAL, b64_json=""),
    typed(images_api.COMPLETED, b64_json=7),
    typed(images_api.PARTIAL),
])  # fmt: skip
def test_hostile_events_fail_the_request_as_a_bad_stream(hostile):
    record = run([(partial(0), 0.1), (hostile, 0.2), (completed(), 0.3)])
    assert record.error_kind == ErrorKind.BAD_STREAM and record.inputs == 0


def test_hostile_usage_is_dropped_or_fails_never_counted():
    strings = run([(completed({"output_tokens": "3", "input_tokens": [1]}), 0.1)])
    assert strings.ok and strings.usage_completion_tokens is None and strings.prompt_tokens is None
    huge = run([(completed({"output_tokens": 10**12}), 0.1)])
    assert huge.error_kind == ErrorKind.BAD_STREAM and huge.usage_completion_tokens is None


@given(st.binary(max_size=300), st.integers(0, 300))
def test_fuzzed_bytes_never_raise(data, split):
    record = run([(partial(0), 0.1), (data, 0.2), (completed(), 0.3)], split)
    assert record.ok or record.error_kind is not None


@given(st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=8),
       st.sampled_from([images_api.PARTIAL, images_api.COMPLETED, "error", "other"]))  # fmt: skip
def test_fuzzed_event_objects_never_raise(value, kind):
    data = orjson.dumps({"type": kind, "b64_json": value, "usage": value, "error": value})
    record = RequestRecord(endpoint="images", t_send=0.0)
    assert images_api.apply_event(record, data, 0.1) in (True, False)


def body(images: object, usage: object = USAGE) -> bytes:
    return orjson.dumps({"created": 1, "data": images, "usage": usage})


def test_the_json_body_counts_its_images_or_fails():
    record = RequestRecord(endpoint="images", t_send=0.0)
    images_api.read_images(body([{"b64_json": IMAGE}, {"b64_json": IMAGE}]), record, 1)
    assert record.ok and record.inputs == 2 and (record.usage_completion_tokens, record.prompt_tokens) == (3, 7)
    assert record.output_bytes == 2 * 48
    hostile = (
        b"<html>",
        body([]),
        body({"b64_json": IMAGE}),
        body([{"url": "https://x"}]),
        body([{"b64_json": ""}]),
        orjson.dumps({"error": {"message": "no"}}),
        body([{"b64_json": IMAGE}], {"output_tokens": -1}),
    )
    for bad in hostile:
        record = RequestRecord(endpoint="images", t_send=0.0)
        images_api.read_images(bad, record, 1)
        assert record.error_kind == ErrorKind.BAD_STREAM, bad


def test_the_api_s_entry_its_counting_and_the_built_in_request():
    entry = APIS["images"]
    assert entry.mount == "images.generate" and entry.user == "ImagesUser" and COUNTINGS["images"] is images_api.IMAGES
    assert entry.streams_body({"stream": True}) and not entry.streams_body({}) and not entry.counts_outputs
    s = Settings.from_options(options("--host", "http://127.0.0.1:1", "--prompt-tokens", "16", "--seed", "1"))
    spec = Workload(s.workload, "images", server_family=s.endpoint.server_family).next_request("m")
    sent = json.loads(spec.body)
    assert spec.streamed and sent["stream"] is True and sent["partial_images"] == images_api.PARTIAL_IMAGES
    assert isinstance(sent["prompt"], str) and sent["model"] == "m" and "max_tokens" not in sent
    whole = Settings.from_options(options("--host", "http://127.0.0.1:1", "--extra-body", '{"stream": false, "n": 2}'))
    spec = Workload(whole.workload, "images", server_family=whole.endpoint.server_family).next_request("m")
    assert not spec.streamed and json.loads(spec.body)["n"] == 2


def sim_spec(**data: object):
    return parse_request(orjson.dumps({"model": "sim", **data}), "images", ("sim",), 16)[0]


def test_the_simulator_s_request_checks():
    spec = sim_spec(prompt="a red fox", stream=True, partial_images=2, n=2, size="512x256")
    assert (spec.output_tokens, spec.inputs, spec.prompt_tokens, spec.stream) == (6, 2, 3, True)
    assert sim_spec(prompt="a fox", n=3, partial_images=2).output_tokens == 3  # not streamed: one token per image
    assert sim_images.image_bytes("auto") == sim_images.image_bytes("1024x1024") == 1024 * 1024 // 64
    for bad in ({}, {"prompt": ""}, {"prompt": "x", "size": "big"}, {"prompt": "x", "n": 0}, {"prompt": "x", "n": 11},
                {"prompt": "x", "partial_images": 4}, {"prompt": "x", "response_format": "url"},
                {"prompt": "x", "n": "2"}, {"prompt": "x", "quality": 3}):  # fmt: skip
        with pytest.raises(ApiError) as refused:
            sim_spec(**bad)
        assert refused.value.status == 400, bad


def test_the_simulator_s_events_and_body_read_by_the_client():
    """The simulator's stream (every token event, written one ITL apart) and body, read by the client's parser and
    body reader: the images, their partials, their bytes."""
    spec = sim_spec(prompt="a red fox", stream=True, partial_images=2, n=2, size="256x128")
    encoder = sim_images.ImagesEncoder(spec, "img-1", 1, "sim", 0)
    events = [(b"".join(encoder.token_event(i)), 0.1 + 0.01 * i) for i in range(spec.output_tokens)]
    record = run([(encoder.start_events(), 0.05), *events] if encoder.start_events() else events, split=17)
    assert record.ok and record.inputs == 2 and record.events == 6 and record.output_tokens == 6
    assert record.ttft_s == pytest.approx(0.1) and len(record.itl_us) == 5 and record.prompt_tokens == 3
    images = [json.loads(e.split(b"data: ", 1)[1]) for e, _t in events]
    assert [e["type"] for e in images][:3] == [images_api.PARTIAL, images_api.PARTIAL, images_api.COMPLETED]
    assert [e.get("partial_image_index") for e in images][:2] == [0, 1]
    assert {len(base64.b64decode(e["b64_json"])) for e in images} == {256 * 128 // 64}
    assert record.output_bytes == 2 * sim_images.image_bytes("256x128")
    whole = sim_spec(prompt="a red fox", n=3, size="256x128")
    record = RequestRecord(endpoint="images", t_send=0.0)
    images_api.read_images(sim_images.ImagesEncoder(whole, "img-2", 1, "sim", 0).body(), record, 1)
    assert record.ok and record.inputs == 3 and record.prompt_tokens == 3
    assert record.output_bytes == 3 * sim_images.image_bytes("256x128")


@pytest.mark.parametrize("size", range(12))
def test_decoded_bytes_from_the_base64_length(size):
    text = base64.b64encode(bytes(range(size))).decode()
    assert images_api.decoded_bytes(text) == size
    assert images_api.decoded_bytes(text.rstrip("=")) == size  # unpadded, as some servers send it
