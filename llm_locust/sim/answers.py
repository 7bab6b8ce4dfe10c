"""What the simulator answers when an answer can be right or wrong: questions it recognises, and structured outputs.

- **A question it recognises** in the prompt — the last one of llm-locust's built-in sets' arithmetic or
  multiple-choice questions ("What is 37 + 58? Answer with the number only.", "Which number equals 37 + 58?\\nA. 93\\n
  B. 95\\nC. 104\\nD. 85\\nAnswer with the letter only.") — is answered from the truth it computes itself: the number
  ("95") or the right letter ("B") with probability `--accuracy`, else a wrong one (the number off by 1 to 10, or
  another letter). With `--degrade-above-batch N`, a request admitted into a running batch of more than N sequences
  (itself included: `engine.Sequence.batch`) is right with probability `--degraded-accuracy` instead. The draw is
  made when the first token is produced, i.e. after its admission.
- **An answer its API's parse makes** (a transcript: `apis/transcriptions.py`) is given the answerer: each of its
  words is heard right with probability `--accuracy` (`--degraded-accuracy` above `--degrade-above-batch`), else as
  another word, drawn as it is settled.
- **A structured output** (a request asking for JSON in its API's field, as its API reads it: `Api.output_format`,
  e.g. chat's `response_format`, Responses' `text.format`, text completions' `structured_outputs` / `json_schema`)
  is answered with a JSON value valid for the schema (`instance`: object with its properties, string, number,
  integer, boolean, null, array, enum, const; a `json_object` request gets `{"answer": <words>}`), made invalid with
  probability `--invalid-json-rate` (its last character left out when it ends with `}`, `]` or `"`, else a stray `,`
  after it). The draw is made on arrival.

One seeded draw per decision, each from its own generator (`--answer-seed`): the first n requests of a kind get the
first n draws, whatever their order, so a test recounts the sim's decisions from the seed alone. The answer's pieces
are its tokens — the number or the letter is one token, a JSON text one token per whitespace-separated word with the
space before it — and its length follows the usual rules (`wire.output_length`: a request's maximum cuts it, finish
"length"; `ignore_eos` / `min_tokens` pad it with space tokens). Anything else gets the usual words.

Each request's trace records its answer (`Answer.to_dict`: kind, text, batch); GET /metrics counts the answers of
the responses that ran to their end without a fault by kind (`llm_locust_sim:answers_total{kind}`: correct, wrong,
valid_json, invalid_json; a JSON answer cut short by its maximum is sent invalid and counted so).
"""

from __future__ import annotations

import json
import math
import random
import re
from dataclasses import replace
from typing import Any

from llm_locust.sim.apis.wire import CompletionSpec, OutputFormat, bad_request, output_length
from llm_locust.sim.words import WORDS

_NUMBER_QUESTION = re.compile(r"What is (\d+) ([-+*]) (\d+)\? Answer with the number only\.")
_CHOICE_QUESTION = re.compile(
    r"Which number equals (\d+) ([-+*]) (\d+)\?\s+A\. (-?\d+)\s+B\. (-?\d+)\s+C\. (-?\d+)\s+D\. (-?\d+)\s+"
    r"Answer with the letter only\."
)
_LETTERS = "ABCD"
_PIECE = re.compile(r"\s*\S+")
KINDS = ("correct", "wrong", "valid_json", "invalid_json")
"""An answer's kinds, as /sim/trace and /metrics name them."""


def truth(prompt: str) -> tuple[str, tuple[str, ...]] | None:
    """The right answer to the last question of `prompt` the simulator recognises, with the wrong answers it may give
    instead (a number: the truth off by 1 to 10, at least 0; a letter: the three others); None when it has none."""
    found = [m for pattern in (_NUMBER_QUESTION, _CHOICE_QUESTION) for m in pattern.finditer(prompt)]
    if not found:
        return None
    last = max(found, key=lambda m: m.start())
    a, op, b = int(last.group(1)), last.group(2), int(last.group(3))
    value = a + b if op == "+" else a - b if op == "-" else a * b
    if last.re is _NUMBER_QUESTION:
        return str(value), tuple(str(value + d) for d in range(-10, 11) if d and value + d >= 0)
    options = [int(last.group(i)) for i in range(4, 8)]
    if value not in options:
        return None
    right = _LETTERS[options.index(value)]
    return right, tuple(letter for letter in _LETTERS if letter != right)


def instance(schema: Any, draw: random.Random, depth: int = 0) -> Any:
    """A JSON value valid for `schema` (the keywords of the module docstring; anything else: a string), its free
    values drawn from `draw`."""
    if not isinstance(schema, dict):
        return _words(draw)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return draw.choice(schema["enum"])
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return instance(schema[key][0], draw, depth)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        return {name: instance(sub, draw, depth + 1) for name, sub in properties.items()} if depth < 8 else {}
    if kind == "array":
        low = int(schema.get("minItems", 1))
        high = max(low, min(int(schema.get("maxItems", 3)), low + 2))
        return [instance(schema.get("items"), draw, depth + 1) for _ in range(draw.randint(low, high))]
    if kind in ("integer", "number"):
        low, high = schema.get("minimum", 0), schema.get("maximum", 100)
        if kind == "integer":
            return draw.randint(math.ceil(low), math.floor(high))
        return min(high, max(low, round(draw.uniform(low, high), 2)))
    if kind == "boolean":
        return draw.random() < 0.5
    if kind == "null":
        return None
    return _words(draw)


def _words(draw: random.Random) -> str:
    """Two or three of the simulator's words."""
    return " ".join(draw.choice(WORDS).strip() for _ in range(draw.randint(2, 3)))


def broken(text: str) -> str:
    """`text` (a JSON value) made invalid: its last character left out when it is `}`, `]` or `"`, else a `,` after
    it."""
    return text[:-1] if text[-1:] in ("}", "]", '"') else text + ","


class Answer:
    """A request's answer: its `kind` (one of `KINDS`; None until settled) and its `pieces` (its tokens, as many as
    its output tokens); `batch` is the running batch it was admitted into (0 until then)."""

    __slots__ = ("_answerer", "_right", "_wrong", "batch", "kind", "length", "pieces")

    def __init__(self, answerer: Answerer | None, length: int, right: str = "", wrong: tuple[str, ...] = ()) -> None:
        self._answerer = answerer
        self._right = right
        self._wrong = wrong
        self.length = length
        self.kind: str | None = None
        self.pieces: tuple[str, ...] = ()
        self.batch = 0

    @classmethod
    def scripted(cls, kind: str, text: str, length: int) -> Answer:
        """An answer settled now: `text` of `kind`, `length` tokens (see `fitted`)."""
        answer = cls(None, length)
        answer._set(kind, text)
        return answer

    def settle(self, batch: int) -> None:
        """Decide a question's answer, right or wrong, for a request admitted into a batch of `batch` sequences (once;
        a structured output's is settled already)."""
        if self.kind is not None or self._answerer is None:
            return
        self.batch = batch
        if self._answerer.right(batch):
            self._set("correct", self._right)
        else:
            self._set("wrong", self._answerer.values.choice(self._wrong))

    def _set(self, kind: str, text: str) -> None:
        pieces = tuple(_PIECE.findall(text)) or (text,)
        if len(pieces) > self.length and kind == "valid_json":
            kind = "invalid_json"  # cut short by the request's maximum: what is sent is not valid
        self.kind = kind
        self.pieces = pieces[: self.length] + (" ",) * (self.length - len(pieces))

    @property
    def text(self) -> str:
        """The whole text sent (its pieces joined)."""
        return "".join(self.pieces)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form served by /sim/trace."""
        return {"kind": self.kind, "text": self.text, "batch": self.batch}


class Answerer:
    """Decides the answers of one simulator (see the module docstring): `accuracy` (0..1), `degrade_above_batch` (0:
    never) and `degraded_accuracy`, `invalid_json_rate`, seeded by `seed`."""

    def __init__(
        self, accuracy: float, degrade_above_batch: int, degraded_accuracy: float, invalid_json_rate: float, seed: int
    ) -> None:
        self.accuracy = accuracy
        self.degrade_above_batch = degrade_above_batch
        self.degraded_accuracy = degraded_accuracy
        self.invalid_json_rate = invalid_json_rate
        self._right_draws = random.Random(f"{seed}/accuracy")
        self._json_draws = random.Random(f"{seed}/invalid-json")
        self.values = random.Random(f"{seed}/values")

    def right(self, batch: int) -> bool:
        """One draw: is the answer of a request admitted into a batch of `batch` sequences right?"""
        degraded = 0 < self.degrade_above_batch < batch
        return self._right_draws.random() < (self.degraded_accuracy if degraded else self.accuracy)

    def plan(self, spec: CompletionSpec, data: dict[str, Any], output_format: OutputFormat | None) -> CompletionSpec:
        """`spec` (of request `data`) answering a structured output — read with its API's `output_format` (None:
        its API has none) — or a recognised question (`spec.answer`, its output tokens the answer's), or `spec`
        itself; an answer its API's parse made already (a transcript's words) is given this answerer, whose draws
        decide it as it is settled (its `answerer`)."""
        if spec.answer is not None:  # its API's parse made it (a transcript): right or wrong by these draws
            spec.answer.answerer = self  # type: ignore[attr-defined]
            return spec
        try:
            asked = output_format(data) if output_format is not None else None
            if asked is not None:
                kind, schema = asked
                value = instance(schema, self.values) if kind == "json_schema" else {"answer": _words(self.values)}
        except (ValueError, TypeError) as e:  # a schema string that is not JSON, bounds that are not numbers, ...
            raise bad_request(f"the structured output's schema is not one the simulator can answer: {e}") from None
        if asked is not None:
            text = json.dumps(value)  # `{"a": 1, "b": 2}`, spaced as models write it
            invalid = self.invalid_json_rate > 0 and self._json_draws.random() < self.invalid_json_rate
            text = broken(text) if invalid else text
            length = _length(spec, data, len(_PIECE.findall(text)))
            answer = Answer.scripted("invalid_json" if invalid else "valid_json", text, length)
            return _answering(spec, answer)
        known = truth(spec.prompt_text)
        if known is None:
            return spec
        return _answering(spec, Answer(self, _length(spec, data, 1), *known))


def _length(spec: CompletionSpec, data: dict[str, Any], natural: int) -> int:
    """The output tokens of an answer of `natural` tokens to request `data` (`wire.output_length`)."""
    return output_length(data, spec.max_tokens, natural)


def _answering(spec: CompletionSpec, answer: Answer) -> CompletionSpec:
    """`spec` carrying `answer`, its output tokens and finish reason the answer's."""
    finish = "length" if spec.max_tokens is not None and answer.length == spec.max_tokens else "stop"
    return replace(spec, output_tokens=answer.length, finish_reason=finish, answer=answer)
