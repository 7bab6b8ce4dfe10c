"""vLLM's realtime transcription over WebSocket against the simulator: sessions of utterances on one socket each, the
audio streamed at real-time pace, over ws:// and wss://, read by the process's pump with kernel receive times; each
utterance's first delta after the final commit and the gaps between deltas agree with the simulator's own write
times (tests/harness/trace_agreement.py's bounds), its audio seconds and real-time factor with the simulator's."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from conftest import options, read_summary, run_local
from harness.session_runs import assert_faults_counted, assert_turns_agree, play_sessions, sessions_through_workers
from harness.trace_agreement import (
    assert_streams_agree,
    served_gaps_ms,
    tls_args,
)
from locust import task

from llm_locust.apis import vllm_realtime
from llm_locust.metrics.record import RequestRecord
from llm_locust.results.console import summary_table
from llm_locust.sim import run_sim
from llm_locust.transport.timeouts import TimeoutWatchdog
from llm_locust.transport.websocket import WebSocket
from llm_locust.users import LLMUser

KEY = "sk-vllm-realtime"
SESSIONS, TURNS, TOKENS = 8, 3, 12
UTTERANCE_S = 0.3
PCM = bytes(round(UTTERANCE_S * vllm_realtime.AUDIO_BYTES_PER_S))


def session(url: str, context, watchdog: TimeoutWatchdog) -> list[RequestRecord]:
    ws = WebSocket(f"{url}/v1/realtime", {"Authorization": f"Bearer {KEY}"}, context)
    records = []
    for number in range(TURNS):
        record = RequestRecord("vllm_realtime", 0.0)
        events = vllm_realtime.turn({"audio": PCM, "model": None if number else "llm-locust-sim"})
        records.append(
            ws.exchange(events, record, vllm_realtime.apply_event, watchdog, pace=vllm_realtime.audio_seconds)
        )
    ws.close()
    return records


@pytest.mark.alone  # first delta and gaps within 1 ms of the trace
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_utterances_agree_with_the_trace(scheme, pki):
    """Sessions of 3 utterances of 0.3 s each, streamed at real-time pace: the counts as the trace's, the audio's
    seconds as the simulator heard them, the first delta and the gaps as the simulator wrote them."""
    sim_args = ("--ttft-ms", "30", "--itl-ms", "8", "--output-tokens", str(TOKENS), "--api-key", KEY)
    records, trace = play_sessions(session, SESSIONS, sim_args, pki, scheme, "vllm_realtime")
    assert len(records) == SESSIONS * TURNS == len(trace)
    assert all(record.ok and record.finish_reason == "stop" for record in records), [r.error_message for r in records]
    for record in records:  # the counts per utterance equal the trace's
        served_record = trace[record.server_request_id]
        assert record.events == len(served_record["token_times"]) == record.usage_completion_tokens == TOKENS
        assert record.prompt_tokens == served_record["prompt_tokens"]
        assert served_record["answer"]["audio_s"] == pytest.approx(UTTERANCE_S)
    sessions = Counter(served_record["session"] for served_record in trace.values())
    assert len(sessions) == SESSIONS and set(sessions.values()) == {TURNS}
    assert_turns_agree(records, trace, f"vllm_realtime {scheme}")
    for record in records:  # the final commit handed over after the audio's duration → transcription.done read
        assert record.t_done >= record.t_last > record.t_first > record.t_send


LOCUSTFILE = Path(__file__).parents[2] / "locustfiles" / "vllm_realtime.py"
REQUESTS = 24
SHORT_LOCUSTFILE = f"""import sys
sys.path.insert(0, {str(LOCUSTFILE.parent)!r})
import vllm_realtime


class ShortUtterances(vllm_realtime.VllmRealtimeSessionUser):
    utterance_s = {UTTERANCE_S}
"""


@pytest.mark.alone  # first delta and gaps within 1 ms of the trace
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_sessions_through_two_processes_agree_with_the_trace(tmp_path, pki, scheme):
    """locustfiles/vllm_realtime.py (its utterances shortened to 0.3 s) through `--processes 2`: 0 failures; every
    utterance's deltas and tokens as the simulator wrote them, 3 per session; the first delta after the final commit
    and every gap within 1 ms at p50 (3 ms at p99, as the other API run tests) of the simulator's write times; the
    audio seconds and the real-time factor within 1 % of the simulator's."""
    served_tls, trust = tls_args(pki, scheme)
    (tmp_path / "short.py").write_text(SHORT_LOCUSTFILE)
    with run_sim("--ttft-ms", "40", "--itl-ms", "10", "--output-tokens", "8", *served_tls) as sim:
        assert sim.url.startswith(f"{scheme}://")
        summary, lines, served = sessions_through_workers(
            tmp_path / "short.py", sim.url, sim.trace, "vllm_realtime", tmp_path, REQUESTS, trust
        )
    m, t = summary["metrics"], summary["throughput"]
    assert t["output_tokens"] == 8 * len(served) and sorted({line["turn"] for line in lines}) == [1, 2, 3]
    served_audio_s = sum(r["answer"]["audio_s"] for r in served.values())
    assert t["input_s"] == pytest.approx(served_audio_s, rel=0.01) == UTTERANCE_S * len(served)
    e2e_s = sum(r["token_times"][-1] - r["t_recv"] for r in served.values())  # the final commit → the last delta
    assert t["real_time_factor"] == pytest.approx(e2e_s / served_audio_s, rel=0.01)
    table = summary_table(summary)  # the console shows the audio heard beside the tokens, in its own units
    assert f"{t['input_s_per_s']:.1f} audio in s/s, {t['real_time_factor']:.3f} RTF" in table, table
    assert m["itl_ms"]["count"] == len(served_gaps_ms(list(served.values()))) == 7 * len(served)
    assert_streams_agree(m, lines, served, scheme, ("first delta", "gap"), least=REQUESTS // 2)


class OneUtterance(LLMUser):
    """A session of one utterance after another, each on its own socket."""

    @task
    def speak(self):
        with self.llm.vllm_realtime.connect() as session:
            session.turn(audio=PCM[:3200], model=session.model)


def test_fault_kinds_counted_exactly(tmp_path):
    """The simulator's faults on a WebSocket counted exactly as injected, never raised into the scenario
    (`assert_faults_counted`; seed 1: seed 5 draws no huge_chunk in its first picks here)."""
    assert_faults_counted(tmp_path, OneUtterance, seed=1)


class Transcriber(LLMUser):
    """A session of two utterances, with `name=`, `score=` and `catch_response`."""

    turns: list = []

    @task
    def transcribe(self):
        with self.llm.vllm_realtime.connect() as session:
            first = session.turn(audio=PCM, model=session.model, name="first", score=lambda answer: answer.text != "")
            with session.turn(audio=PCM, name="second", catch_response=True) as second:
                if second.ok and second.usage.completion_tokens != 8:
                    second.failure("expected the simulator's 8 tokens")
            Transcriber.turns.append((first, second))


def test_a_scenario_session_of_two_utterances(tmp_path):
    """`self.llm.vllm_realtime.connect()` in a scenario: two utterances on one socket, the first named and scored, the
    second judged with `catch_response`; each as the simulator traced it, in the run's `name` breakdown, its audio's
    seconds the run's audio seconds."""
    Transcriber.turns = []
    with run_sim("--ttft-ms", "10", "--itl-ms", "3", "--output-tokens", "8") as sim:
        opts = options("--host", sim.url, "--results-dir", str(tmp_path))
        run_local(opts, users=2, seconds=2.0, user_classes=[Transcriber], stop_timeout_s=5)
        trace = {r["id"]: r for r in sim.trace()}
    sessions = Transcriber.turns
    assert sessions and len(trace) == 2 * len(sessions)
    for first, second in sessions:
        assert first.ok and second.ok and first.score == 1.0
        assert first.usage.completion_tokens == second.usage.completion_tokens == 8 == len(second.itl_s) + 1
        assert trace[first.request_id]["session"] == trace[second.request_id]["session"]
        assert first.record.input_s == pytest.approx(UTTERANCE_S) == second.record.input_s  # three 0.1 s appends
    summary = read_summary(tmp_path)
    rows = {row["label"]: row["requests_ok"] for row in summary["breakdowns"]["name"]}
    assert rows == {"first": len(sessions), "second": len(sessions)}
    assert summary["accuracy"]["scored"] == len(sessions)
    assert summary["throughput"]["input_s"] == pytest.approx(UTTERANCE_S * 2 * len(sessions))
