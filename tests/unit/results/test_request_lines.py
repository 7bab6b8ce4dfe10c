"""The per-request lines (`results.request_lines`): the line of a record, the seeded sample, the bounded buffer, the
file; the server's request id taken from each API's stream; `--requests-sample` checked."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from types import SimpleNamespace

import orjson
import pytest

from llm_locust.apis import messages as messages_api
from llm_locust.apis import responses as responses_api
from llm_locust.errors import ConfigError
from llm_locust.load.clock import Offset, RunClock
from llm_locust.metrics import protocol
from llm_locust.metrics.record import ErrorKind, RequestRecord
from llm_locust.metrics.request import NO_SPEC, RequestSpec
from llm_locust.metrics.scoring import Reference
from llm_locust.results.request_lines import (
    FIELDS,
    EpochClock,
    RequestLines,
    RequestsFile,
    line_of,
    read_lines,
)
from llm_locust.results.settings import OutputSettings

CLOCK = EpochClock(offset_s=1_700_000_000.0)


def finished(t_send: float = 10.0, **fields) -> RequestRecord:
    """A successful streamed request sent at `t_send` (perf_counter s): 4 tokens, usage sent; `fields` set on it (those
    of its request, `RequestSpec`'s, on its spec)."""
    own = set(RequestSpec.__slots__) - set(RequestRecord.__slots__)  # read through the record's spec
    spec = replace(NO_SPEC, **{name: fields.pop(name) for name in list(fields) if name in own})
    record = RequestRecord(endpoint="chat", t_send=t_send, t_uploaded=t_send + 0.002, t_headers=t_send + 0.01,
                           t_first=t_send + 0.05, spec=spec,
                           t_last=t_send + 0.2, t_done=t_send + 0.2005, usage_completion_tokens=4, prompt_tokens=12,
                           status_code=200, saw_done=True, server_request_id="chatcmpl-7")  # fmt: skip
    for name, value in fields.items():
        setattr(record, name, value)
    return record


def test_line_of_a_successful_request():
    line = json.loads(
        line_of(finished(t_sched=9.5, step=2, groups=(("replica", "1"), ("name", "ask")), model="m"), CLOCK)
    )
    assert list(line) == [name for name, _ in FIELDS]
    times = {
        "t_sched": 9.5,
        "t_send": 10.0,
        "t_uploaded": 10.002,
        "t_headers": 10.01,
        "t_first": 10.05,
        "t_last": 10.2,
        "t_done": 10.2005,
    }
    assert {name: line.pop(name) for name in times} == pytest.approx(
        {name: 1_700_000_000.0 + t for name, t in times.items()}, abs=1e-6
    )
    assert line == {
        "request_id": "chatcmpl-7", "endpoint": "chat", "step": 2, "measured": True, "outcome": "ok", "status": 200,
        "error_kind": None, "prompt_tokens": 12, "output_tokens": 4, "token_source": "usage", "replica": "1",
        "model": "m", "session": None, "turn": None, "name": "ask", "score": None, "correct": None, "answer": None,
        "reference": None,
    }  # fmt: skip


def test_line_of_a_scored_request_has_its_score_answer_and_reference():
    reference = Reference(expected="4", schema={"type": "string"})
    line = json.loads(line_of(finished(reference=reference, score=1.0, content_text="4.0"), CLOCK))
    assert (line["score"], line["correct"], line["answer"]) == (1.0, True, "4.0")
    assert line["reference"] == {"expected": "4", "schema": True}
    wrong = json.loads(line_of(finished(reference=Reference(choices=("a", "b"), answer="B"), score=0.0,
                                        content_text="A"), CLOCK))  # fmt: skip
    assert (wrong["score"], wrong["correct"], wrong["answer"], wrong["reference"]) == (0.0, False, "A", {"answer": "B"})
    unscored = json.loads(line_of(finished(reference=reference, content_text="kept"), CLOCK))  # e.g. it failed
    assert (unscored["score"], unscored["correct"], unscored["answer"]) == (None, None, None)


def test_line_of_a_failed_and_of_a_cancelled_request():
    failed = RequestRecord(endpoint="chat", t_send=1.0, t_done=1.5)
    failed.fail(ErrorKind.CONNECT, "refused")
    line = json.loads(line_of(failed, CLOCK))
    assert (line["outcome"], line["error_kind"], line["status"], line["request_id"]) == ("failed", "connect", None,
                                                                                         None)  # fmt: skip
    assert line["t_first"] is None and line["t_sched"] is None and line["step"] is None
    assert line["output_tokens"] == 0 and line["token_source"] == "events"
    assert json.loads(line_of(finished(cancelled=True), CLOCK))["outcome"] == "cancelled"


def test_epoch_clock_joins_time_time():
    assert CLOCK.epoch_s(0.125) == 1_700_000_000.125 and CLOCK.epoch_s(None) is None
    now = EpochClock.now()
    assert abs(now.epoch_s(time.perf_counter()) - time.time()) < 0.01


@pytest.mark.alone  # a line's time within 10 ms of the wall clock read just after
def test_lines_are_on_the_run_clock_as_its_offset_stands_when_each_is_made():
    """A worker's lines: its own clock minus the offset measured from its master (`load.clock.RunClock`), the offset
    of the moment each line is made (none yet: its own clock)."""
    run_clock = RunClock()
    lines = RequestLines(1.0, 1, 0, run_clock=run_clock)
    t_send = time.perf_counter()
    lines.add(finished(t_send=t_send))
    run_clock.offset = Offset(-3.0, 0.0002)  # this process's clock is 3 s behind its master's
    lines.add(finished(t_send=t_send))
    own, corrected = (orjson.loads(line)["t_send"] for line in lines.take()[0].splitlines())
    assert abs(own - time.time()) < 0.01 and corrected == pytest.approx(own + 3.0, abs=1e-6)


def test_sample_is_seeded_and_about_the_share():
    def kept(seed: int | None, index: int, sample: float = 0.25) -> list[int]:
        lines = RequestLines(sample, seed, index)
        for i in range(2000):
            lines.add(finished(step=i))
        data, dropped = lines.take()
        assert dropped == 0
        return [orjson.loads(line)["step"] for line in data.splitlines()]

    first = kept(7, 0)
    assert kept(7, 0) == first  # the same seed and process: the same requests
    assert kept(7, 1) != first  # another process draws its own
    assert abs(len(first) - 500) <= 4 * (2000 * 0.25 * 0.75) ** 0.5
    assert len(kept(None, 0, sample=1.0)) == 2000


def test_buffer_is_bounded_and_take_empties_it():
    one = len(line_of(finished(), EpochClock.now()))
    lines = RequestLines(1.0, 1, 0, limit_bytes=5 * one // 2)  # room for 3 lines (lengths vary by a digit or two)
    for _ in range(5):
        lines.add(finished())
    data, dropped = lines.take()
    assert (data.count(b"\n"), dropped) == (3, 2)
    assert lines.take() == (b"", 0)


def test_requests_file_appends_counts_and_warns(tmp_path):
    out = RequestsFile(tmp_path / "run")
    out.write(line_of(finished(), CLOCK) * 2)
    out.write(b"", dropped=3)
    out.close()
    out.write(line_of(finished(), CLOCK))  # after the end: counted as dropped
    assert [r["request_id"] for r in read_lines(out.path)] == ["chatcmpl-7"] * 2
    assert out.as_dict(0.5) == {"file": "requests.jsonl", "lines": 2, "sample": 0.5, "dropped": 4}
    assert out.warnings() and "4 request line(s)" in out.warnings()[0]
    assert RequestsFile(tmp_path / "other").warnings() == ()


def test_read_lines_leaves_out_a_line_cut_short(tmp_path):
    path = tmp_path / "requests.jsonl"
    path.write_bytes(line_of(finished(), CLOCK) + b'{"request_id": "cut')
    assert len(read_lines(path)) == 1


def test_the_response_id_of_each_api_unless_a_header_gave_one():
    chat = RequestRecord(endpoint="chat", t_send=0.0)
    protocol.apply_event(chat, b'{"id":"chatcmpl-1","choices":[{"delta":{"role":"assistant"}}]}', 1.0)
    protocol.apply_event(chat, b'{"id":"chatcmpl-other","choices":[{"delta":{"content":"a"}}]}', 1.1)
    assert chat.server_request_id == "chatcmpl-1"
    headed = RequestRecord(endpoint="chat", t_send=0.0, server_request_id="from-header")
    protocol.apply_event(headed, b'{"id":"chatcmpl-1","choices":[{"delta":{"content":"a"}}]}', 1.0)
    assert headed.server_request_id == "from-header"
    responses = RequestRecord(endpoint="responses", t_send=0.0)
    responses_api.apply_event(responses, b'{"type":"response.created","response":{"id":"resp_9"}}', 1.0)
    assert responses.server_request_id == "resp_9"
    messages = RequestRecord(endpoint="messages", t_send=0.0)
    messages_api.apply_event(messages, b'{"type":"message_start","message":{"id":"msg_3","usage":{}}}', 1.0)
    assert messages.server_request_id == "msg_3"
    odd = RequestRecord(endpoint="chat", t_send=0.0)
    protocol.apply_event(odd, b'{"id":42,"choices":[{"delta":{"content":"a"}}]}', 1.0)
    assert odd.server_request_id == "" and odd.ok


@pytest.mark.parametrize("sample", [0.0, -0.5, 1.5])
def test_requests_sample_outside_zero_one_is_refused(sample):
    options = SimpleNamespace(
        results_dir="r", interval_s=5.0, cost_per_hour=0.0, requests_jsonl=True, requests_sample=sample
    )
    with pytest.raises(ConfigError, match=r"--requests-sample must be > 0 and <= 1"):
        OutputSettings.from_options(options)


def test_requests_sample_left_empty_in_the_web_ui_is_the_default():
    options = SimpleNamespace(
        results_dir="r", interval_s=5.0, cost_per_hour=0.0, requests_jsonl=False, requests_sample=""
    )
    assert OutputSettings.from_options(options).requests_sample == 1.0
