"""Answers scored against references (exact match, regex, multiple-choice letter, JSON schema), accuracy counted per
window with its Wilson interval, merged across processes, gated by --min-accuracy, and two runs' accuracies compared
with the two-proportion z-test — pure units (the runs: tests/integration/test_accuracy_runs.py)."""

from __future__ import annotations

import math
import random

import pytest
from conftest import options

from llm_locust.config.settings import Settings
from llm_locust.errors import ConfigError
from llm_locust.metrics.gates import EXIT_GATE_FAILED, verdict
from llm_locust.metrics.record import ErrorKind, RequestRecord
from llm_locust.metrics.scoring import (
    Reference,
    accuracy_stats,
    checked_score,
    chosen_letter,
    exact_match,
    normalise,
    proportion_test,
    reference_problem,
    regex_match,
    schema_problem,
    schema_valid,
    score,
    wilson_interval,
)
from llm_locust.metrics.window import WindowMetrics
from llm_locust.results.sections import throughput


@pytest.mark.parametrize(
    ("answer", "expected"),
    [("42", "42.0"), ("+42", "42"), ("4.2e1", "42"), ("42.", "42"), ("1,000", "1000"), ("-0.0", "0"),
     ("  Paris! ", "paris"), ("The  quick\nbrown fox.", "the quick brown fox"), ("New-York", "new york"),
     ("0.50", ".5")],
)  # fmt: skip
def test_exact_match_ignores_case_whitespace_punctuation_and_number_formatting(answer, expected):
    assert exact_match(answer, expected)


@pytest.mark.parametrize(("answer", "expected"), [("42", "43"), ("4 2", "42"), ("Paris", "London"), ("42", "forty-two"),
                                                  ("-42", "42"), ("the answer is 42", "42")])  # fmt: skip
def test_exact_match_is_still_exact(answer, expected):
    assert not exact_match(answer, expected)
    assert normalise("42.000") == "42" and normalise("Hello,  World") == "hello world"


def test_regex_searches_anywhere_in_the_answer():
    assert regex_match("The answer is 42.", r"\b42\b")
    assert not regex_match("The answer is 420.", r"\b42\b")
    assert regex_match("YES", r"(?i)^yes$")


@pytest.mark.parametrize(
    ("answer", "letter"),
    [("C", "C"), ("(c)", "C"), ("c.", "C"), ("Answer: C", "C"), ("The answer is (B).", "B"), ("answer - D", "D"),
     ("B) Paris", "B"), ("paris", "B"), ("I pick C because A is wrong", "C"), ("It's B", "B"),
     ("The answer is a matter of taste: C", "C"), ("none of them", None), ("E", None), ("", None)],
)  # fmt: skip
def test_multiple_choice_letter_forms(answer, letter):
    assert chosen_letter(answer, ("London", "Paris", "Rome", "Oslo")) == letter


def test_a_letter_without_choices_is_any_capital():
    assert chosen_letter("Z") == "Z" and chosen_letter("so: Q") == "Q" and chosen_letter("lower case only") is None


SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False}


@pytest.mark.parametrize(
    ("answer", "valid"),
    [('{"n": 3}', True), (' {"n": 3}\n', True), ('{"n": "3"}', False), ('{"n": 3, "m": 1}', False), ('{"n": 3', False),
     ("```json\n{\"n\": 3}\n```", False), ("", False), ("[]", False)],
)  # fmt: skip
def test_json_schema_validity(answer, valid):
    assert schema_valid(answer, SCHEMA) is valid


def test_schema_problems_are_named():
    assert schema_problem(SCHEMA) is None
    assert schema_problem([1]) == "a JSON schema must be an object, got list"
    assert "not a valid JSON schema" in schema_problem({"type": "no-such-type"})


def test_a_reference_scores_1_when_every_check_it_sets_holds():
    assert score(Reference(expected="4"), "4.0") == 1.0
    assert score(Reference(expected="4"), "5") == 0.0
    both = Reference(regex=r'"n": 4', schema=SCHEMA)
    assert score(both, '{"n": 4}') == 1.0
    assert score(both, '{"n": 5}') == 0.0  # valid JSON, wrong value
    assert score(both, '"n": 4') == 0.0  # right value, not JSON
    assert score(Reference(choices=("x", "y"), answer="B"), "Answer: B") == 1.0
    assert score(Reference(choices=("x", "y"), answer="B"), "A") == 0.0
    assert score(Reference(), "anything") == 1.0  # nothing to check


def test_a_scenario_scorers_result_must_be_a_bool_or_a_fraction():
    assert checked_score(True) == 1.0 and checked_score(False) == 0.0 and checked_score(0.25) == 0.25
    for bad in (1.5, -0.1, "yes", None, math.nan):
        with pytest.raises(ValueError, match="score= must return a bool or a number in"):
            checked_score(bad)


def test_wilson_interval_matches_the_textbook_and_stays_in_bounds():
    low, high = wilson_interval(80, 100)  # Wilson (1927): 0.7112 .. 0.8666
    assert low == pytest.approx(0.71117, abs=1e-4) and high == pytest.approx(0.86663, abs=1e-4)
    assert wilson_interval(0, 10)[0] == 0.0 and 0 < wilson_interval(0, 10)[1] < 0.35
    assert wilson_interval(10, 10)[1] == pytest.approx(1.0) and wilson_interval(10, 10)[0] > 0.65
    assert wilson_interval(0, 0) is None


def test_wilson_interval_covers_the_truth_about_95_percent_of_the_time():
    rng, p, n, covered = random.Random(7), 0.8, 60, 0
    for _ in range(2000):
        k = sum(rng.random() < p for _ in range(n))
        low, high = wilson_interval(k, n)
        covered += low <= p <= high
    assert 0.93 <= covered / 2000 <= 0.975


def scored(score_value: float | None, ok: bool = True) -> RequestRecord:
    r = RequestRecord("chat", t_send=0.0)
    r.t_first = r.t_first_content = 0.1
    r.t_last = r.t_done = 0.2
    r.events = r.usage_completion_tokens = 2
    r.itl_us.append(100_000)
    r.score = score_value
    if not ok:
        r.fail(ErrorKind.HTTP_5XX, "HTTP 500")
    return r


def test_accuracy_is_counted_per_window_merged_and_leaves_unscored_and_failed_requests_out():
    a, b = WindowMetrics(), WindowMetrics()
    for value in (1.0, 1.0, 0.0, None):
        a.add(scored(value))
    for value in (1.0, 0.5):
        b.add(scored(value))
    b.add(scored(None, ok=False))
    assert accuracy_stats(WindowMetrics()) is None
    merged = WindowMetrics.from_wire(a.to_wire())  # the worker -> master wire
    merged.merge(WindowMetrics.from_wire(b.to_wire()))
    stats = accuracy_stats(merged)
    assert (stats["scored"], stats["correct"], stats["score_sum"]) == (5, 3, 3.5)
    assert stats["accuracy"] == 0.7
    assert (stats["ci95_low"], stats["ci95_high"]) == pytest.approx(wilson_interval(3.5, 5), abs=1e-6)
    assert stats["stderr"] == pytest.approx(math.sqrt(0.7 * 0.3 / 5), abs=1e-6)
    assert merged.requests_ok == 6 and merged.requests_failed == 1


def summary_with(accuracy: dict | None) -> dict:
    w = WindowMetrics()
    w.add(scored(1.0))
    return {"run": {}, "throughput": throughput(w, 1.0), "metrics": {}, "accuracy": accuracy}


def test_min_accuracy_gate():
    low = {"scored": 100, "correct": 72, "score_sum": 72.0, "accuracy": 0.72, "ci95_low": 0.63, "ci95_high": 0.8}
    failed = verdict(summary_with(low), min_accuracy=0.9)
    assert not failed["passed"] and failed["exit_code"] == EXIT_GATE_FAILED
    assert failed["reasons"] == ["accuracy 0.7200 (72 of 100 scored answers right, 95 % CI 0.630-0.800) < "
                                 "--min-accuracy 0.9"]  # fmt: skip
    assert failed["accuracy"] == 0.72 and failed["min_accuracy"] == 0.9
    assert verdict(summary_with({**low, "accuracy": 0.9}), min_accuracy=0.9)["passed"]
    assert verdict(summary_with(low))["passed"]  # not gated
    unscored = verdict(summary_with(None), min_accuracy=0.5)
    assert unscored["reasons"] == ["--min-accuracy 0.5 set but no answer was scored"]


@pytest.mark.parametrize("value", ["1.5", "-0.1"])
def test_min_accuracy_out_of_range_is_a_one_line_error(value):
    with pytest.raises(ConfigError, match=r"--min-accuracy must be a fraction in \[0, 1\]"):
        Settings.from_options(options("--host", "http://127.0.0.1:1", "--min-accuracy", value))


def test_two_proportion_z_test_flags_a_drop_of_ten_points_not_an_equal_run():
    drop = proportion_test(800, 1000, 700, 1000)
    assert drop.difference == pytest.approx(-0.1) and drop.z < -5 and drop.p_value < 1e-6
    same = proportion_test(800, 1000, 800, 1000)
    assert same.difference == 0 and same.p_value == 1.0
    small = proportion_test(8, 10, 7, 10)  # the same drop on 10 answers each is noise
    assert small.p_value > 0.5
    assert proportion_test(5, 10, 0, 0) is None
    assert proportion_test(10, 10, 0, 10).p_value < 1e-4  # pooled variance: defined at 0 and 1 too


def test_a_reference_that_cannot_score_is_named_before_any_request():
    assert reference_problem(Reference(expected="4", regex=r"\d", schema=SCHEMA)) is None
    assert reference_problem(Reference(regex="(unclosed")).startswith("'regex' is not a valid regular expression (")
    assert reference_problem(Reference(schema={"type": 5})).startswith("'schema': not a valid JSON schema")


def test_an_options_text_padded_with_spaces_is_still_that_option():
    """`--ignore-eos` pads an answer with space tokens: "Paris" and a hundred spaces picks Paris."""
    assert chosen_letter("Paris" + " " * 100, ("London", "Paris")) == "B"
    assert chosen_letter("word " * 100, ("London", "Paris")) is None  # a long answer is no option's text
