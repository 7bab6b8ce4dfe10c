"""Answers scored against a reference, and accuracy as a measured proportion (docs/metrics.md "Accuracy").

A `Reference` travels with the request (`metrics.request.RequestSpec.reference`, from a dataset row's `expected`,
`regex`, `choices` + `answer`, `schema` fields); a request with one keeps its answer text
(`RequestRecord.content_text`), which is scored (`score`) after the transport returned the closed record — never in
the stream's read loop. A scenario's own scorer (`score=` on a call) gives a score the same way (`checked_score`).

A score is in [0, 1] (a right/wrong check: 1 or 0). Per set of requests (`window.Counts`): `answers_scored`,
`answers_correct` (score 1) and `answer_score_sum`; accuracy = answer_score_sum / answers_scored — the share right
when every score is 0 or 1 — with a Wilson 95 % interval (`accuracy_stats`); two runs' accuracies are compared with a
two-proportion z-test (`proportion_test`). Pure: no Locust, no gevent.
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any, Protocol

import orjson


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


Z_95 = 1.959963984540054
"""The standard normal quantile of a two-sided 95 % interval."""
_PUNCTUATION = re.compile(r"[^\w\s]|_")
_SPACES = re.compile(r"\s+")
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?")
_ANSWER_IS = re.compile(r"\b(?i:answer)\s*(?:(?i:is)\s*)?[:\-]?\s*\(?([A-Z])(?![\w'])")
_BARE_LETTER = re.compile(r"\W*([A-Za-z])\W*")


def normalise(text: str) -> str:
    """`text` as exact match compares it: a number as its plain decimal value ("42.0", "+42", "4.2e1", "42." and
    "42" all give "42"; "1,000" gives "1000"), any other text case-folded, without punctuation, its whitespace runs
    made one space and trimmed."""
    stripped = text.strip().rstrip(".").strip()
    if _NUMBER.fullmatch(stripped) and any(c.isdigit() for c in stripped):
        try:
            value = Decimal(stripped.replace(",", ""))
        except InvalidOperation:
            value = None
        if value is not None and value.is_finite():
            plain = format(value.normalize(), "f")
            return "0" if plain in ("-0", "+0") else plain
    text = unicodedata.normalize("NFKC", text).casefold()
    return _SPACES.sub(" ", _PUNCTUATION.sub(" ", text)).strip()


def exact_match(answer: str, expected: str) -> bool:
    """The answer equals `expected` once both are `normalise`d."""
    return normalise(answer) == normalise(expected)


@lru_cache(maxsize=256)
def _pattern(regex: str) -> re.Pattern[str]:
    return re.compile(regex)


def regex_match(answer: str, regex: str) -> bool:
    """The answer contains a match of `regex` (`re.search`; patterns compiled once)."""
    return _pattern(regex).search(answer) is not None


def chosen_letter(answer: str, choices: tuple[str, ...] = ()) -> str | None:
    """The option a multiple-choice answer picks, as an upper-case letter, None when it picks none: an "Answer: C" /
    "the answer is (C)" form, else an answer that is one letter in any case ("c", "(c)."), else the answer's text
    equal (`normalise`d) to one of `choices` (an answer not four times longer than the longest: normalising a long
    text costs tens of µs), else the first standalone capital among the options' letters (A–Z
    without `choices`): "C) Paris", "C. because", "I pick C".
    """
    letters = string.ascii_uppercase[: len(choices) or 26]
    bare = _BARE_LETTER.fullmatch(answer)
    if bare and bare.group(1).upper() in letters:
        return bare.group(1).upper()
    stated = _ANSWER_IS.search(answer) if "answer" in answer.lower() else None  # the search costs µs per KB
    if stated and stated.group(1).upper() in letters:
        return stated.group(1).upper()
    if choices and len(answer.strip()) <= 4 * max(map(len, choices)) + 16:  # a long answer is no option's text
        said = normalise(answer)
        for letter, choice in zip(letters, choices, strict=False):
            if said == normalise(choice):
                return letter
    found = re.search(rf"(?<![\w'])([{letters}])(?![\w'])", answer)
    return found.group(1) if found else None


def schema_valid(answer: str, schema: Mapping[str, Any]) -> bool:
    """The answer is one JSON value (whitespace around it allowed) that satisfies `schema` (the `jsonschema`
    library's validator for the schema's draft, made once per schema)."""
    try:
        value = orjson.loads(answer)
    except orjson.JSONDecodeError:
        return False
    return _validator(schema).is_valid(value)


_validators: dict[int, tuple[Mapping[str, Any], Any]] = {}


def _validator(schema: Mapping[str, Any]) -> Any:
    """The `jsonschema` validator of `schema`, made once per schema object (kept with it, so its id stays its own;
    at most `_MEMO_SIZE` of them)."""
    held = _validators.get(id(schema))
    if held is None or held[0] is not schema:
        _bounded(_validators)
        held = _validators[id(schema)] = (schema, _validator_class(schema)(schema))
    return held[1]


def _bounded(memo: dict[int, Any]) -> None:
    """Empty `memo` (by schema id, each entry holding its schema) once it holds `_MEMO_SIZE` schemas: a scenario that
    builds a new schema object per call must not keep them all alive."""
    if len(memo) >= _MEMO_SIZE:
        memo.clear()


_MEMO_SIZE = 256


def _validator_class(schema: Mapping[str, Any]) -> Any:
    from jsonschema.validators import validator_for  # an optional extra: llm-locust[schema]

    return validator_for(schema)


_schema_problems: dict[int, tuple[Any, str | None]] = {}


def schema_problem(schema: Any) -> str | None:
    """Why `schema` is not a JSON schema the scorer can check answers against (not an object, not valid for its
    draft, or the `jsonschema` library missing), None when it is one; checked once per schema object (a scenario
    passes the same one call after call)."""
    held = _schema_problems.get(id(schema))
    if held is None or held[0] is not schema:
        _bounded(_schema_problems)
        held = _schema_problems[id(schema)] = (schema, _schema_problem(schema))
    return held[1]


def _schema_problem(schema: Any) -> str | None:
    if not isinstance(schema, Mapping):
        return f"a JSON schema must be an object, got {type(schema).__name__}"
    try:
        cls = _validator_class(schema)
    except ImportError:
        return "checking answers against a JSON schema needs the jsonschema library: pip install 'llm-locust[schema]'"
    from jsonschema.exceptions import SchemaError

    try:
        cls.check_schema(schema)
    except SchemaError as e:
        return f"not a valid JSON schema: {e.message}"
    return None


def reference_problem(reference: Reference) -> str | None:
    """Why `reference` cannot score answers — its regex does not compile, its schema is no JSON schema
    (`schema_problem`) — naming the field; None when it can."""
    if reference.regex is not None:
        try:
            _pattern(reference.regex)
        except re.error as e:
            return f"'regex' is not a valid regular expression ({e})"
    problem = None if reference.schema is None else schema_problem(reference.schema)
    return None if problem is None else f"'schema': {problem}"


def score(reference: Reference, answer: str) -> float:
    """The answer's score against `reference`: 1.0 when every check the reference sets holds (`exact_match`,
    `regex_match`, the multiple-choice letter, `schema_valid`), else 0.0."""
    if reference.expected is not None and not exact_match(answer, reference.expected):
        return 0.0
    if reference.regex is not None and not regex_match(answer, reference.regex):
        return 0.0
    if reference.answer is not None and chosen_letter(answer, reference.choices) != reference.answer:
        return 0.0
    if reference.schema is not None and not schema_valid(answer, reference.schema):
        return 0.0
    return 1.0


def checked_score(value: Any) -> float:
    """A scenario scorer's result as a score: a bool as 1.0 / 0.0, a number in [0, 1] as it is; ValueError naming
    the value otherwise."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float) and 0.0 <= value <= 1.0:
        return float(value)
    raise ValueError(f"score= must return a bool or a number in [0, 1], got {value!r}")


def wilson_interval(successes: float, n: int, z: float = Z_95) -> tuple[float, float] | None:
    """The Wilson score interval (lower, upper) of a proportion `successes` / `n` at the normal quantile `z` (95 %
    by default); None when n is 0. Unlike the normal approximation it stays inside [0, 1] and is sound near 0 and 1.
    """
    if n <= 0:
        return None
    p = successes / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(max(p * (1 - p) / n + z2 / (4 * n * n), 0.0))
    return max(0.0, centre - half), min(1.0, centre + half)


class ScoredCounts(Protocol):
    """The counters of scored answers of a set of requests (`window.Counts` has them)."""

    answers_scored: int
    answers_correct: int
    answer_score_sum: float


def accuracy_stats(counts: ScoredCounts) -> dict[str, Any] | None:
    """summary.json's `accuracy` of a set of requests (`counts`: a window, a step, a breakdown group, the run):
    `scored` answers, `correct` (score 1), `score_sum`, `accuracy` (= score_sum / scored), its Wilson 95 % interval
    `ci95_low` .. `ci95_high` and its standard error `stderr` (sqrt(p (1 - p) / n)); None when no answer was scored."""
    scored, score_sum = counts.answers_scored, counts.answer_score_sum
    if scored <= 0:
        return None
    p = score_sum / scored
    low, high = wilson_interval(score_sum, scored)  # type: ignore[misc]
    return {
        "scored": scored,
        "correct": counts.answers_correct,
        "score_sum": round(score_sum, 6),
        "accuracy": round(p, 6),
        "ci95_low": round(low, 6),
        "ci95_high": round(high, 6),
        "stderr": round(math.sqrt(p * (1 - p) / scored), 6),
    }


@dataclass(frozen=True, slots=True)
class ProportionTest:
    """Two proportions compared: `base` and `candidate` (share of n), the `difference` (candidate − base, in
    proportion units), the z statistic and the two-sided p value of the pooled two-proportion z-test."""

    base: float
    candidate: float
    difference: float
    z: float
    p_value: float


def proportion_test(base_successes: float, base_n: int, cand_successes: float, cand_n: int) -> ProportionTest | None:
    """The pooled two-proportion z-test of `cand_successes`/`cand_n` against `base_successes`/`base_n`; None when a
    side has no trial. With scores between 0 and 1 (partial credit) the test is conservative: a score's variance is
    at most p (1 − p)."""
    if base_n <= 0 or cand_n <= 0:
        return None
    p1, p2 = base_successes / base_n, cand_successes / cand_n
    pooled = (base_successes + cand_successes) / (base_n + cand_n)
    se = math.sqrt(pooled * (1 - pooled) * (1 / base_n + 1 / cand_n))
    z = (p2 - p1) / se if se else 0.0 if p1 == p2 else math.copysign(math.inf, p2 - p1)
    return ProportionTest(p1, p2, p2 - p1, z, math.erfc(abs(z) / math.sqrt(2)))
