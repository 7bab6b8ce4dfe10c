"""The bodies' encodings (`apis.bodies`): JSON, and multipart/form-data read back by the simulator's form reader
(`sim.apis.forms`) — every field form the openai SDK takes, files whose bytes look like a boundary, hostile forms."""

from __future__ import annotations

import io
import mimetypes

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_locust.apis import APIS
from llm_locust.apis.bodies import json_body, multipart_body
from llm_locust.metrics.request import JSON
from llm_locust.sim.apis.forms import FormFile, multipart_form
from llm_locust.sim.apis.wire import ApiError


def _guessed(filename: str) -> str:
    """The content type a file part of `filename` carries when none is given (urllib3 guesses it by its name)."""
    return mimetypes.guess_type(filename)[0] or "application/octet-stream"


def test_json_body_is_the_json_object() -> None:
    assert json_body({"model": "m", "stream": True}) == (orjson.dumps({"model": "m", "stream": True}), JSON)
    assert all(entry.encode_body is json_body for name, entry in APIS.items() if name != "transcriptions")


def test_multipart_fields_round_trip(tmp_path) -> None:
    audio = tmp_path / "speech.wav"
    audio.write_bytes(b"RIFF\x00\xff\r\n\r\n--")
    body = {"file": audio, "model": "m", "stream": True, "temperature": 0.5, "include": ["logprobs"], "prompt": None,
            "extra": {"a": 1}}  # fmt: skip
    data, content_type = multipart_body(body)
    assert content_type.startswith("multipart/form-data; boundary=")
    fields = multipart_form(data, content_type)
    file = FormFile("speech.wav", _guessed("speech.wav"), b"RIFF\x00\xff\r\n\r\n--")
    assert fields == {"file": file, "model": "m", "stream": "true", "temperature": "0.5", "include": ["logprobs"],
                      "extra": '{"a":1}'}  # fmt: skip


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b"abc", FormFile("file", _guessed("file"), b"abc")),
        (("a.wav", b"abc"), FormFile("a.wav", _guessed("a.wav"), b"abc")),
        (("a.wav", b"abc", "audio/wav"), FormFile("a.wav", "audio/wav", b"abc")),
        (io.BytesIO(b"abc"), FormFile("file", _guessed("file"), b"abc")),
    ],
)
def test_multipart_file_forms(value: object, expected: FormFile) -> None:
    assert multipart_form(*multipart_body({"file": value}))["file"] == expected


def test_each_request_has_its_own_boundary() -> None:
    assert multipart_body({"a": "b"})[1] != multipart_body({"a": "b"})[1]


@given(st.binary(max_size=300), st.text(max_size=40))
def test_any_bytes_and_text_round_trip(content: bytes, text: str) -> None:
    fields = multipart_form(*multipart_body({"file": ("f", content), "language": text}))
    assert fields == {"file": FormFile("f", _guessed("f"), content), "language": text}


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b'{"model": "m"}', "application/json"),
        (b'--b\r\nContent-Disposition: form-data; name="a"\r\n\r\nx\r\n', "multipart/form-data; boundary=b"),
        (b"--b\r\nContent-Disposition: form-data\r\n\r\nx\r\n--b--\r\n", "multipart/form-data; boundary=b"),
        (b"--b\r\nno headers\r\n--b--\r\n", "multipart/form-data; boundary=b"),
        (b'--b\r\nContent-Disposition: form-data; name="a"\r\n\r\n\xff\r\n--b--\r\n', "multipart/form-data;boundary=b"),
        (b"--bx\r\n--b--\r\n", "multipart/form-data"),
    ],
)
def test_malformed_forms_are_bad_requests(body: bytes, content_type: str) -> None:
    with pytest.raises(ApiError) as raised:
        multipart_form(body, content_type)
    assert raised.value.status == 400
