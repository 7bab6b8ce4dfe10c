"""Multi-turn sessions, pure: the history, the turn breakdown's buckets, think-time distributions, and a `Workload`
playing sessions turn by turn with the answers fed back."""

from __future__ import annotations

import random
import statistics

import orjson
import pytest
from conftest import options

from llm_locust.config.settings import Settings
from llm_locust.errors import ConfigError
from llm_locust.metrics.record import RequestRecord, turn_group
from llm_locust.workload.builder import Workload
from llm_locust.workload.sessions import Session, parse_duration


def test_session_history_grows_with_answers_and_counts_seen_blocks():
    session = Session("s-1", turns=3)
    messages, tokens, seen = session.ask("a " * 600, 600)
    assert messages == [{"role": "user", "content": "a " * 600}] and (tokens, seen) == (600, 0)
    session.answered(" b c", 2)
    messages, tokens, seen = session.ask("d", 1)
    assert [m["role"] for m in messages] == ["user", "assistant", "user"] and messages[1]["content"] == " b c"
    assert (tokens, seen, session.turn, session.done) == (603, 1, 2, False)  # 602 history tokens: 1 whole block
    session.add({"role": "tool", "tool_call_id": "x", "content": "r"}, 1)  # open to other message kinds
    assert session.messages[-1]["role"] == "tool" and session.history_tokens == 604
    session.ask("e", 1)
    assert session.done
    assert len(messages) == 3  # what `ask` returned is a copy


@pytest.mark.parametrize(
    ("turn", "label"),
    [(1, "1"), (2, "2"), (3, "3-4"), (4, "3-4"), (5, "5-8"), (8, "5-8"), (9, "9-16"), (16, "9-16"), (17, "17+")],
)
def test_turn_buckets(turn, label):
    assert turn_group(turn) == ("turn", label)


def test_think_time_distributions():
    assert parse_duration("0", "--think-time-s").sample_s(random.Random(0)) == 0
    assert parse_duration("1.5", "--think-time-s").sample_s(random.Random(0)) == 1.5
    uniform = parse_duration("uniform:1,3", "--think-time-s")
    assert all(1 <= uniform.sample_s(random.Random(i)) <= 3 for i in range(200))
    exponential = parse_duration("exponential:2", "--think-time-s")
    assert abs(statistics.mean(exponential.sample_s(random.Random(i)) for i in range(4000)) - 2) < 0.15
    lognormal = parse_duration("lognormal:2,1", "--think-time-s")
    assert abs(statistics.mean(lognormal.sample_s(random.Random(i)) for i in range(4000)) - 2) < 0.1
    assert str(uniform) == "uniform:1,3" and str(parse_duration("2", "--x")) == "2"


@pytest.mark.parametrize(
    ("text", "why"),
    [("-1", ">= 0"), ("abc", "numbers"), ("uniform:3,1", "MIN <= MAX"), ("gamma:1", "unknown"),
     ("exponential:1,2", "1 parameter"), ("nan", "finite")],
)  # fmt: skip
def test_bad_think_times_are_one_line_errors(text, why):
    with pytest.raises(ConfigError, match=why) as e:
        parse_duration(text, "--think-time-s")
    assert "--think-time-s" in str(e.value) and "\n" not in str(e.value)


def workload(endpoint: str, *args: str) -> Workload:
    s = Settings.from_options(options("--host", "http://127.0.0.1:1", "--seed", "3", *args))
    return Workload(s.workload, endpoint, server_family=s.endpoint.server_family)


def answer(spec, text: str, failed: bool = False) -> RequestRecord:
    record = RequestRecord("chat", 0.0, spec=spec, answer_text=text if spec.keep_answer else None)
    if failed:
        record.error_kind = "http_5xx"  # type: ignore[assignment]
    return record


def test_workload_plays_sessions_turn_by_turn_with_the_answers_as_returned():
    w = workload("chat", "--session-turns", "3", "--prompt-tokens", "300", "--max-tokens", "4")
    specs = []
    for i in range(4):
        spec = w.next_request("m")
        specs.append(spec)
        w.answered(answer(spec, f" answer{i} x y z"))
    assert [s.turn for s in specs] == [1, 2, 3, 1] and [s.keep_answer for s in specs] == [True, True, False, True]
    assert len({s.session for s in specs[:3]}) == 1 and specs[3].session != specs[0].session
    third = orjson.loads(specs[2].body)["messages"]
    assert [m["role"] for m in third] == ["user", "assistant", "user", "assistant", "user"]
    assert [third[1]["content"], third[3]["content"]] == [" answer0 x y z", " answer1 x y z"]
    assert [s.expected_prompt_tokens for s in specs] == [300, 604, 908, 300]
    assert [s.prefix_blocks for s in specs] == [(0, 0), (1, 0), (1, 1), (0, 0)]  # 604 // 512 seen at turn 3
    assert w.think_time_s() == 0  # no --think-time-s


def test_a_failed_turn_ends_its_session_and_one_turn_requests_are_unchanged():
    w = workload("chat", "--session-turns", "4", "--think-time-s", "uniform:0.5,1")
    first = w.next_request("m")
    w.answered(answer(first, " a"))
    assert 0.5 <= w.think_time_s() <= 1
    second = w.next_request("m")
    w.answered(answer(second, " b", failed=True))
    assert w.think_time_s() == 0
    third = w.next_request("m")
    assert (second.turn, third.turn) == (2, 1) and third.session != first.session
    plain = workload("chat").next_request("m")
    assert (plain.turn, plain.keep_answer) == (0, False) and "content" in orjson.loads(plain.body)["messages"][0]


@pytest.mark.parametrize("endpoint", ["chat", "responses", "messages", "completions"])
def test_every_chat_shaped_api_carries_the_history(endpoint):
    w = workload(endpoint, "--session-turns", "2", "--prompt-tokens", "5")
    w.answered(answer(w.next_request("m"), " the answer"))
    body = orjson.loads(w.next_request("m").body)
    sent = orjson.dumps(body).decode()
    assert " the answer" in sent
    if endpoint == "completions":
        assert len(body["prompt"].split()) == 12
    else:
        listed = body["input" if endpoint == "responses" else "messages"]
        assert [m["role"] for m in listed] == ["user", "assistant", "user"]


def test_session_turns_refuse_a_dataset_or_a_trace(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text('"hello"\n')
    for source in (("--dataset", str(data)), ("--trace", str(data))):
        with pytest.raises(ConfigError, match=f"--session-turns and {source[0]} exclude each other") as e:
            workload("chat", "--session-turns", "3", *source)
        assert "\n" not in str(e.value)
