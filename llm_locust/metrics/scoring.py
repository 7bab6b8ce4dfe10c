"""Answers scored against a reference: what a request's answer should be, and how close it came.

A `Reference` travels with the request (`workload.builder.RequestSpec.reference`, from a dataset row's `expected`,
`regex`, `choices` + `answer`, `schema` fields); a request with one keeps its answer text
(`RequestRecord.content_text`), which is scored after the record is closed, off the stream's hot path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Reference:
    """What a right answer is; every check it sets must hold (None / () : not checked).

    `expected`: the answer, compared after normalisation (case, whitespace, punctuation, a number's formatting);
    `regex`: a pattern the answer must contain (`re.search`); `choices` and `answer`: a multiple-choice item's options
    and the right one's letter ("A" for the first); `schema`: a JSON schema the answer, parsed as JSON, must satisfy.
    """

    expected: str | None = None
    regex: str | None = None
    choices: tuple[str, ...] = ()
    answer: str | None = None
    schema: Mapping[str, Any] | None = None
