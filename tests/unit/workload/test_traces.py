"""Trace files (workload/traces.py): the three published formats, the window, and one-line errors for bad files."""

from __future__ import annotations

import json

import pytest

from llm_locust.errors import ConfigError
from llm_locust.workload.traces import TraceWindow, load_trace


def write(path, text):
    path.write_text(text)
    return str(path)


def mooncake(tmp_path, rows):
    return write(tmp_path / "trace.jsonl", "".join(json.dumps(r) + "\n" for r in rows))


ROWS = [
    {"timestamp": 1000, "input_length": 1100, "output_length": 5, "hash_ids": [0, 1, 2]},
    {"timestamp": 1000, "input_length": 600, "output_length": 6, "hash_ids": [0, 3]},
    {"timestamp": 3000, "input_length": 1024, "output_length": 7, "hash_ids": [0, 1]},
    {"timestamp": 7000, "input_length": 100, "output_length": 8, "hash_ids": [9]},
]


def test_mooncake_times_lengths_and_reuse(tmp_path):
    trace = load_trace(mooncake(tmp_path, ROWS), "mooncake", TraceWindow(speedup=2))
    assert trace.due_s == (0.0, 0.0, 1.0, 3.0)  # ms from the first request, halved
    assert [(r.input_tokens, r.output_tokens) for r in trace.requests] == [(1100, 5), (600, 6), (1024, 7), (100, 8)]
    # whole blocks (a cut last block is not counted) and of those, seen before in trace order
    assert [(r.prefix_blocks, r.prefix_blocks_seen) for r in trace.requests] == [(2, 0), (1, 1), (2, 2), (0, 0)]


def test_the_window_and_the_request_cap(tmp_path):
    path = mooncake(tmp_path, ROWS)
    trace = load_trace(path, "mooncake", TraceWindow(start_s=1.0, duration_s=5.0))
    assert [r.output_tokens for r in trace.requests] == [7] and trace.due_s == (0.0,)
    # reuse counts start with the window: a replay starts on a cold cache
    assert (trace.requests[0].prefix_blocks, trace.requests[0].prefix_blocks_seen) == (2, 0)
    assert len(load_trace(path, "mooncake", TraceWindow(max_requests=3)).requests) == 3


SESSION_ROWS = [
    {"timestamp": 0, "session_id": "a", "input_length": 600, "output_length": 5, "hash_ids": [1, 2]},
    {"timestamp": 500, "input_length": 100, "output_length": 6, "hash_ids": [9]},
    {"session_id": "a", "delay": 2000, "input_length": 1100, "output_length": 7, "hash_ids": [1, 2, 3]},
    {"timestamp": 1000, "session_id": "b", "input_length": 50, "output_length": 8},
    {"session_id": "a", "delay": 0, "input_length": 1600, "output_length": 9, "hash_ids": [1, 2, 3, 4]},
    {"timestamp": 9000, "session_id": "c", "input_length": 50, "output_length": 1},
    {"session_id": "c", "delay": 100, "input_length": 60, "output_length": 1},
]


def test_sessions_first_turns_are_arrivals_later_turns_follow_with_their_delay(tmp_path):
    trace = load_trace(mooncake(tmp_path, SESSION_ROWS), "mooncake", TraceWindow(speedup=2, duration_s=5))
    requests = trace.requests
    assert [r.output_tokens for r in requests] == [5, 6, 7, 8, 9]  # session c starts after the window: left out
    assert trace.arrivals == (0, 1, 3) and trace.due_s == (0.0, 0.25, 0.5)
    assert [(r.session, r.turn, r.next_turn) for r in requests] == [
        ("a", 1, 2), ("", 0, -1), ("a", 2, 4), ("b", 0, -1), ("a", 3, -1)]  # fmt: skip
    assert [r.delay_s for r in requests] == [0, 0, 1.0, 0, 0]  # ms, divided by the speed-up
    assert [(r.prefix_blocks, r.prefix_blocks_seen) for r in requests[::2]] == [(1, 0), (2, 1), (3, 2)]
    capped = load_trace(mooncake(tmp_path, SESSION_ROWS), "mooncake", TraceWindow(max_requests=3))
    assert [r.output_tokens for r in capped.requests] == [5, 6, 7] and capped.requests[2].next_turn == -1


def test_azure_and_burstgpt(tmp_path):
    azure = write(tmp_path / "azure.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                  "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n")  # fmt: skip
    trace = load_trace(azure, "azure", TraceWindow())
    assert [(r.input_tokens, r.output_tokens) for r in trace.requests] == [(374, 44), (396, 109)]
    assert trace.due_s[1] == pytest.approx(4.314579, abs=1e-6)
    burst = write(tmp_path / "burst.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                  "5,ChatGPT,472,18,490,Conversation log\n45,GPT-4,1087,0,1087,Conversation log\n"
                  "118,ChatGPT,417,30,447,API log\n200,GPT-4,300,20,320,API log\n")  # fmt: skip
    trace = load_trace(burst, "burstgpt", TraceWindow())
    assert [r.input_tokens for r in trace.requests] == [472, 417, 300]  # the failed row (0 response tokens) skipped
    assert trace.due_s == (0.0, 113.0, 195.0)
    only = load_trace(burst, "burstgpt", TraceWindow(model="ChatGPT", log_type="API log"))
    assert [r.input_tokens for r in only.requests] == [417]


@pytest.mark.parametrize(
    ("fmt", "text", "message"),
    [
        ("azure", "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46,3\n", ":1: no column 'GeneratedTokens'"),
        ("mooncake", '{"timestamp": 5, "input_length": 3, "output_length": 1}\n'
                     '{"timestamp": 4, "input_length": 3, "output_length": 1}\n',
         ":2: timestamp goes back in time"),
        ("mooncake", '{"timestamp": 5, "input_length": -3, "output_length": 1}\n', ":1: input_length must be"),
        ("burstgpt", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n1,ChatGPT,4,-2,2,API log\n",
         ":2: Response tokens must be"),
        ("mooncake", '{"timestamp": 5, "input_length": 3, "output_length": 1}\n{"timestamp": 6, "input_len\n',
         ":2: not valid JSON"),
        ("burstgpt", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n1,ChatGPT,4\n",
         ":2: expected 6 fields"),
        ("mooncake", '{"timestamp": 5, "output_length": 1}\n', ":1: no field 'input_length'"),
        ("azure", "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,3,4\n", ":2: TIMESTAMP is not a date"),
        ("mooncake", '{"timestamp": 5, "session_id": 7, "input_length": 3, "output_length": 1}\n',
         ":1: session_id must be a string"),
        ("mooncake", '{"timestamp": 5, "session_id": "s", "delay": 3, "input_length": 3, "output_length": 1}\n',
         ":1: delay is for a later turn"),
        ("mooncake", '{"timestamp": 5, "session_id": "s", "input_length": 3, "output_length": 1}\n'
                     '{"session_id": "s", "delay": -1, "input_length": 3, "output_length": 1}\n',
         ":2: delay must be a number >= 0"),
    ],
)  # fmt: skip
def test_a_bad_trace_names_file_line_and_field(tmp_path, fmt, text, message):
    path = write(tmp_path / "bad", text)
    with pytest.raises(ConfigError) as e:
        load_trace(path, fmt, TraceWindow())
    assert str(e.value).startswith(path + message) and "\n" not in str(e.value)
