"""A multipart/form-data request body as its fields (`wire.Api.decode` of an API that takes a file upload, as
`POST /v1/audio/transcriptions` does): each text part a string, each `<name>[]` part an item of the list `name`, each
file part a `FormFile` (its file name, content type and bytes). Strict, as a server's form parser is: a body that is
not a well-formed form under its Content-Type's boundary is HTTP 400.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from llm_locust.sim.apis.wire import bad_request

_BOUNDARY = re.compile(r'boundary="?([^";]+)"?')
_PARAM = re.compile(rb'(\w+)="([^"]*)"')


@dataclass(frozen=True, slots=True)
class FormFile:
    """One uploaded file: its `filename`, its part's `content_type` ("" when it names none) and its `content`."""

    filename: str
    content_type: str
    content: bytes


def multipart_form(body: bytes, content_type: str) -> dict[str, Any]:
    """The fields of a multipart/form-data `body` under the boundary its `content_type` names; ApiError (400) when it
    is not such a form."""
    found = _BOUNDARY.search(content_type)
    if not content_type.lower().startswith("multipart/form-data") or found is None:
        raise bad_request(f"request body must be multipart/form-data with a boundary, got {content_type!r}")
    pieces = body.split(b"--" + found[1].encode())
    if len(pieces) < 3 or not pieces[-1].startswith(b"--"):
        raise bad_request("multipart body has no parts or no closing boundary")
    fields: dict[str, Any] = {}
    for piece in pieces[1:-1]:
        if not (piece.startswith(b"\r\n") and piece.endswith(b"\r\n")):
            raise bad_request("multipart part is not framed by CRLF")
        head, sep, content = piece[2:-2].partition(b"\r\n\r\n")
        if not sep:
            raise bad_request("multipart part has no blank line after its headers")
        headers = dict(_header(line) for line in head.split(b"\r\n"))
        params = dict(_PARAM.findall(headers.get("content-disposition", b"")))
        if b"name" not in params:
            raise bad_request("multipart part has no Content-Disposition name")
        name = params[b"name"].decode()
        if b"filename" in params:
            value: Any = FormFile(params[b"filename"].decode(), headers.get("content-type", b"").decode(), content)
        else:
            try:
                value = content.decode()
            except UnicodeDecodeError:
                raise bad_request(f"multipart field {name!r} is not UTF-8 text") from None
        if name.endswith("[]"):
            fields.setdefault(name[:-2], []).append(value)
        else:
            fields[name] = value
    return fields


def _header(line: bytes) -> tuple[str, bytes]:
    """A part's header line as (lower-case name, value); ApiError when it is not one."""
    name, sep, value = line.partition(b":")
    if not sep:
        raise bad_request(f"multipart part header is malformed: {line[:80]!r}")
    return name.strip().lower().decode(), value.strip()
