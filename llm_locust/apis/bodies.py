"""How an API's body goes on the wire (`apis.Api.encode_body`): the body's fields — made one way for every request,
a built-in user's and a scenario's (`workload.body.request_body`) — become the request's bytes and Content-Type.

`json_body`: one JSON object (every text API). `multipart_body`: multipart/form-data, as a file upload is sent
(`POST /v1/audio/transcriptions`): each field one part, a file one part with its file name, in the forms the openai
SDK takes a file in, under a random boundary per request (urllib3's encoder is not used: importing urllib3 imports
`ssl` before Locust's gevent patches it).
"""

from __future__ import annotations

import mimetypes
import os
from typing import Any
from uuid import uuid4

import orjson

from llm_locust.metrics.request import JSON


def json_body(body: dict[str, Any]) -> tuple[bytes, str]:
    """`body` as one JSON object."""
    return orjson.dumps(body), JSON


def _file(name: str, value: Any) -> tuple[str, bytes, str]:
    """A file field's (file name, content, content type): `bytes` (named after the field), a (file name, content[,
    content type]) tuple, a path, or an open binary file (named after its file); the content type guessed from the
    file name when not given (application/octet-stream when it tells none)."""
    if isinstance(value, tuple):
        filename, content, *kind = value
        filename = str(filename)
        content = _file(name, content)[1]
    elif isinstance(value, bytes | bytearray | memoryview):
        filename, content, kind = name, bytes(value), []
    elif isinstance(value, os.PathLike):
        with open(value, "rb") as file:
            filename, content, kind = os.path.basename(value), file.read(), []
    else:
        filename, content, kind = os.path.basename(str(getattr(value, "name", name))), value.read(), []
    return filename, content, kind[0] if kind else mimetypes.guess_type(filename)[0] or "application/octet-stream"


def _quoted(text: str) -> str:
    """A name or file name in a Content-Disposition header (HTML's form encoding: CR, LF and '"' percent-encoded)."""
    return text.replace("\r", "%0D").replace("\n", "%0A").replace('"', "%22")


def _text(value: Any) -> str:
    """A form field's text: a string as it is, a bool as JSON writes it, a number, an object or a list as JSON."""
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def multipart_body(body: dict[str, Any]) -> tuple[bytes, str]:
    """`body` as multipart/form-data: a file (`bytes`, a (file name, content[, content type]) tuple, a path, an open
    binary file) as a file part, a list as one `<name>[]` part per item (the openai SDK's form: `include[]`), any
    other value as its text (`_text`); None left out."""
    boundary = uuid4().hex
    parts: list[bytes] = []
    for name, value in body.items():
        if value is None:
            continue
        if isinstance(value, bytes | bytearray | memoryview | tuple | os.PathLike) or hasattr(value, "read"):
            filename, content, kind = _file(name, value)
            head = f'name="{_quoted(name)}"; filename="{_quoted(filename)}"\r\nContent-Type: {kind}'
            parts.append(b"%s\r\n\r\n%s" % (head.encode(), content))
        else:
            items = [(f"{name}[]", item) for item in value] if isinstance(value, list) else [(name, value)]
            parts += [f'name="{_quoted(key)}"\r\n\r\n{_text(item)}'.encode() for key, item in items]
    delimiter = b"--%s\r\nContent-Disposition: form-data; " % boundary.encode()
    data = b"".join(delimiter + part + b"\r\n" for part in parts) + b"--%s--\r\n" % boundary.encode()
    return data, f"multipart/form-data; boundary={boundary}"
