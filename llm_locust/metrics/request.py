"""A request's facts from its call to its record (`RequestSpec`): the one type they travel in.

A built-in user's workload (`workload.builder.Workload.next_request`) or a scenario's call (`runtime.llm_client`)
makes the `RequestSpec`; the caller opens the request's record on it (`record.open_record`: the record holds it by
reference, `RequestRecord.spec`, and reads its facts from it) as it hands the request to the transport, which sends
it, reads the answer onto the record and returns it (`transport.request`).
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_locust.metrics.scoring import Reference

JSON = "application/json"
"""The Content-Type of a JSON body: every text API's (`apis.bodies.json_body`), the users' fixed header."""


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request to send: its body (JSON, or as its API encodes it: `content_type`), the prompt tokens the client
    expects the server to count, and its shared prompt blocks (`RequestRecord.prefix_blocks`, `prefix_blocks_seen`),
    its session id and its 1-based turn in a multi-turn session (0: not one), whether its answer is to be kept
    (`RequestRecord.answer_text`: a later turn sends it back), the model it names and the breakdowns it counts in
    (`RequestRecord.groups`: the `model` one with `--model-mix`, a scenario's `name`), and the reference its answer
    is scored against (`scoring.Reference`, None: not scored; a request with one keeps its answer). The one type of
    a request's facts from the workload to its record: its record holds it (`RequestRecord.spec`, from
    `record.open_record`)."""

    body: bytes
    expected_prompt_tokens: int | None  # None: not known on the client (dataset without --tokenizer, images)
    prefix_blocks: tuple[int, int] = (0, 0)
    session: str = ""  # the conversation's id (a synthetic request is its own conversation)
    inputs: int = 1  # an API that counts inputs (embeddings): the texts the request carries
    turn: int = 0
    keep_answer: bool = False
    model: str = ""  # the model its body names
    groups: tuple[tuple[str, str], ...] = ()
    reference: Reference | None = None
    content_type: str = JSON  # the body's (`apis.Api.encode_body`): multipart's names its boundary
    input_s: float = 0.0  # seconds of media (audio) the request carries (`apis.Api.input_seconds`)
    streamed: bool = True  # False: an API answering both ways is asked for one JSON body (`Api.streams_body`)


NO_SPEC = RequestSpec(b"", None)
"""The facts of a record made without a request (a test's, a benchmark's): nothing known."""
