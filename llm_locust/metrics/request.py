"""A request's facts from its call to its record (`RequestSpec`), and the one place its record is opened
(`open_record`).

A built-in user's workload (`workload.builder.Workload.next_request`) or a scenario's call (`runtime.llm_client`)
makes the `RequestSpec`; the caller opens the request's record from it as it hands the request to the transport, which
sends it, reads the answer onto the record and returns it (`transport.request`).
"""

from __future__ import annotations

from dataclasses import dataclass
from time import perf_counter
from typing import Protocol

from llm_locust.metrics.record import RequestRecord, reuse_group, turn_group
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
    a request's facts from the workload to its record: the transport's `request.Prepared` carries it, `open_record`
    reads it."""

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
    streamed: bool = True  # False: an API answering both ways is asked for one JSON body (`Api.streams_body`)


class Schedule(Protocol):
    """When a request was due and where it counts: the pacer's ticket (`load.pacing.Ticket`)."""

    @property
    def t_sched(self) -> float | None: ...
    @property
    def step(self) -> int: ...
    @property
    def measured(self) -> bool: ...


def open_record(
    endpoint: str, spec: RequestSpec, schedule: Schedule | None, groups: tuple[tuple[str, str], ...] = ()
) -> RequestRecord:
    """The record of a request of `endpoint` being sent now (`t_send`, perf_counter; the transport takes it again as
    the request leaves), with its facts (`spec`: expected prompt tokens, shared prompt blocks — whole, of which seen
    before; it then counts in the "reuse" breakdown too —, model, own breakdowns, session and turn — a multi-turn
    session's turn counts in the "turn" breakdown too —, the reference its answer is scored against), what its
    `schedule` says (due time, step, whether it counts) and the breakdowns of where it goes (`groups`: its
    replica's)."""
    prefix_blocks = spec.prefix_blocks
    record = RequestRecord(endpoint=endpoint, t_send=perf_counter(), expected_prompt_tokens=spec.expected_prompt_tokens)
    record.prefix_blocks, record.prefix_blocks_seen = prefix_blocks
    record.model = spec.model
    record.groups += spec.groups
    if prefix_blocks[0]:
        record.groups += (reuse_group(*prefix_blocks),)
    record.groups += groups
    if spec.turn:
        record.groups += (turn_group(spec.turn),)
    record.session, record.turn, record.reference = spec.session, spec.turn, spec.reference
    if schedule is not None:
        record.t_sched, record.step, record.measured = schedule.t_sched, schedule.step, schedule.measured
    return record
