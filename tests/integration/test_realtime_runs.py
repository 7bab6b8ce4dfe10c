"""The Realtime API over WebSocket against the simulator: multi-turn sessions on one socket each, over ws:// and wss://,
read by the process's pump with kernel receive times; each turn's first delta after `response.create` and the gaps
between deltas agree with the simulator's own write times (tests/harness/trace_agreement.py's bounds)."""

from __future__ import annotations

import socket
import threading
import time
from functools import partial
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
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, Request

from llm_locust.apis import realtime
from llm_locust.metrics.record import ErrorKind, RequestRecord
from llm_locust.results.console import summary_table
from llm_locust.sim import run_sim
from llm_locust.transport import patches
from llm_locust.transport.timeouts import TimeoutWatchdog
from llm_locust.transport.websocket import HandshakeRefused, WebSocket
from llm_locust.users import LLMUser

KEY = "sk-realtime"
SESSIONS, TURNS, TOKENS = 8, 4, 12


def session(url: str, context, watchdog: TimeoutWatchdog, modality: str = "text") -> list[RequestRecord]:
    ws = WebSocket(f"{url}/v1/realtime?model=llm-locust-sim", {"Authorization": f"Bearer {KEY}"}, context)
    ws.send({"type": "session.update", "session": {"type": "realtime", "output_modalities": [modality]}})
    records = []
    for number in range(TURNS):
        record = RequestRecord("realtime", 0.0)
        events = [realtime.user_item(f"question {number} one two"), realtime.response_create(TOKENS)]
        records.append(ws.exchange(events, record, realtime.apply_event, watchdog))
    ws.close()
    return records


@pytest.mark.alone  # first delta and gaps within 1 ms of the trace
@pytest.mark.parametrize("modality", ["text", "audio"])
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_turns_agree_with_the_trace(scheme, modality, pki):
    """Sessions of 4 turns answered in text or in audio (each audio delta an output, 0.1 s of pcm per token): the
    counts and the audio's seconds as the trace's, the first delta and the gaps as the simulator wrote them."""
    sim_args = ("--ttft-ms", "30", "--itl-ms", "8", "--output-tokens", "64", "--api-key", KEY)
    in_modality = partial(session, modality=modality)
    records, trace = play_sessions(in_modality, SESSIONS, sim_args, pki, scheme, "realtime")
    assert len(records) == SESSIONS * TURNS == len(trace)
    assert all(record.ok and record.finish_reason == "length" for record in records), [r.error_message for r in records]
    for record in records:  # the counts per turn equal the trace's
        served_record = trace[record.server_request_id]
        assert record.events == len(served_record["token_times"]) == record.usage_completion_tokens == TOKENS
        assert record.prompt_tokens == served_record["prompt_tokens"]
        audio = served_record["answer"]
        if modality == "audio":  # the audio's seconds and bytes as the simulator's: 0.1 s of pcm per token
            assert record.output_s == audio["audio_s"] == pytest.approx(TOKENS * 0.1)
            assert record.output_bytes == audio["audio_bytes"] and record.real_time_factor is not None
        else:
            assert audio is None and record.output_s == 0.0 and record.real_time_factor is None
    sessions = {}
    for served_record in trace.values():
        sessions.setdefault(served_record["session"], []).append(served_record)
    assert len(sessions) == SESSIONS and all(len(turns) == TURNS for turns in sessions.values())
    assert_turns_agree(records, trace, f"realtime {scheme} {modality}")
    for record in records:  # the turn's latency: response.create handed over → response.done read
        assert record.t_done >= record.t_last > record.t_first > record.t_send


def test_a_refused_handshake_says_why(pki):
    patches.install()
    with run_sim("--api-key", KEY) as sim, pytest.raises(HandshakeRefused, match="HTTP 401"):
        WebSocket(f"ws://127.0.0.1:{sim.port}/v1/realtime", {"Authorization": "Bearer wrong"})


LOCUSTFILE = Path(__file__).parents[2] / "locustfiles" / "realtime.py"
REQUESTS = 160
SPOKEN_LOCUSTFILE = f"""import sys
sys.path.insert(0, {str(LOCUSTFILE.parent)!r})
import realtime


class SpokenSessionUser(realtime.RealtimeSessionUser):
    output_modalities = ["audio"]
"""


def realtime_locustfile(folder: Path, modality: str) -> Path:
    """locustfiles/realtime.py, or (audio) a subclass of its user whose answers are spoken."""
    if modality == "text":
        return LOCUSTFILE
    (folder / "spoken.py").write_text(SPOKEN_LOCUSTFILE)
    return folder / "spoken.py"


@pytest.mark.alone  # first delta and gaps within 1 ms of the trace
@pytest.mark.parametrize("modality", ["text", "audio"])
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_sessions_through_master_and_two_workers_agree_with_the_trace(tmp_path, pki, scheme, modality):
    """locustfiles/realtime.py through a master and 2 workers: 0 failures; every turn's deltas and tokens as the
    simulator wrote them, 4 turns per session; the first delta after `response.create` and every gap within 1 ms at
    p50 (3 ms at p99, as the other API run tests) of the simulator's write times. Answered in audio (its user's
    subclass asking for it): the audio seconds produced and the real-time factor as the simulator's audio."""
    served_tls, trust = tls_args(pki, scheme)
    with run_sim("--ttft-ms", "40", "--itl-ms", "10", "--output-tokens", "8", *served_tls) as sim:
        assert sim.url.startswith(f"{scheme}://")
        summary, lines, served = sessions_through_workers(
            realtime_locustfile(tmp_path, modality), sim.url, sim.trace, "realtime", tmp_path, REQUESTS, trust
        )
    m, t = summary["metrics"], summary["throughput"]
    assert t["output_tokens"] == 8 * len(served) and sorted({line["turn"] for line in lines}) == [1, 2, 3, 4]
    served_audio_s = sum(r["answer"]["audio_s"] for r in served.values() if r["answer"])
    assert t["output_s"] == pytest.approx(served_audio_s, rel=1e-6, abs=1e-6)
    assert served_audio_s == (pytest.approx(0.8 * len(served)) if modality == "audio" else 0.0)
    if modality == "audio":  # the turns' E2E summed over the audio's seconds, as the simulator's own
        e2e_s = sum(r["t_done"] - r["t_recv"] for r in served.values())
        assert t["real_time_factor"] == pytest.approx(e2e_s / served_audio_s, rel=0.01)
    table = summary_table(summary)  # the console shows the audio produced beside the tokens, only when there is some
    assert ("audio out s/s" in table and "RTF" in table) == (modality == "audio") and "output tok/s" in table, table
    assert m["itl_ms"]["count"] == len(served_gaps_ms(list(served.values()))) == 7 * len(served)
    assert_streams_agree(m, lines, served, f"{scheme} {modality}", ("first delta", "gap"), least=REQUESTS // 2)


SPOKEN_S = 0.75


class RealtimeScenario(LLMUser):
    """A session of a text turn and a spoken one, with `name=`, `score=` and `catch_response`."""

    turns: list = []

    @task
    def talk(self):
        with self.llm.realtime.connect() as session:
            session.update(instructions="be brief", max_output_tokens=5)
            first = session.turn(text="hello there", name="greet", score=lambda answer: answer.text != "")
            t_audio = time.perf_counter()
            with session.turn(audio=bytes(int(48_000 * SPOKEN_S)), name="speak", catch_response=True) as spoken:
                if spoken.ok and spoken.usage.completion_tokens != 5:
                    spoken.failure("expected the session's 5 tokens")
            RealtimeScenario.turns.append((first, spoken, t_audio))


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_scenario_session_with_text_and_audio(tmp_path, pki, scheme):
    """`self.llm.realtime.connect()`: a text turn (`name=`, `score=`) and a spoken turn (`catch_response`) whose audio
    is streamed at its duration; each turn as the simulator traced it, the spoken turn's TTFT from the end of its
    audio, its seconds counted as the run's audio seconds."""
    served_tls, trust = tls_args(pki, scheme)
    RealtimeScenario.turns = []
    with run_sim("--ttft-ms", "10", "--itl-ms", "3", *served_tls) as sim:
        opts = options("--host", sim.url, "--results-dir", str(tmp_path), *trust)
        run_local(opts, users=2, seconds=2.5, user_classes=[RealtimeScenario], stop_timeout_s=5)
        trace = {r["id"]: r for r in sim.trace()}
    sessions = RealtimeScenario.turns
    assert sessions and len(trace) == 2 * len(sessions)
    for first, spoken, t_audio in sessions:
        assert first.ok and spoken.ok and first.score == 1.0
        assert len(first.text.split()) == 5 == spoken.usage.completion_tokens == len(spoken.itl_s) + 1
        served = trace[spoken.request_id]
        assert served["session"] == trace[first.request_id]["session"]
        # the second turn's prompt: the instructions, the first turn's words and answer, one token per audio second
        assert spoken.usage.prompt_tokens == served["prompt_tokens"] == 2 + 2 + 5 + round(SPOKEN_S)
        assert spoken.record.t_send - t_audio >= SPOKEN_S - 0.01  # the audio took its duration to send
        # its TTFT from the end of the audio: the simulator's 10 ms (at most 0.5 s more on a loaded machine: this test
        # runs beside others; the alone ones hold the time within 1 ms)
        assert spoken.record.input_s == SPOKEN_S and 0.009 < spoken.ttft_s < 0.5
    summary = read_summary(tmp_path)
    rows = {row["label"]: row["requests_ok"] for row in summary["breakdowns"]["name"]}
    assert rows == {"greet": len(sessions), "speak": len(sessions)}
    assert summary["accuracy"]["scored"] == len(sessions)
    assert summary["throughput"]["input_s"] == pytest.approx(SPOKEN_S * len(sessions))


class SpokenAnswers(LLMUser):
    """A session whose answers are spoken (`output_modalities: ["audio"]`)."""

    answers: list = []

    @task
    def listen(self):
        with self.llm.realtime.connect() as session:
            session.update(output_modalities=["audio"])
            SpokenAnswers.answers.append(session.turn(text="say three words", max_output_tokens=3))


def test_a_scenarios_spoken_answer(tmp_path):
    """An answer in audio on `self.llm`: its transcript is the answer's text, each audio delta an output, its seconds
    the record's and the run's audio seconds produced, as the simulator's."""
    SpokenAnswers.answers = []
    with run_sim("--ttft-ms", "10", "--itl-ms", "3") as sim:
        opts = options("--host", sim.url, "--results-dir", str(tmp_path))
        run_local(opts, users=2, seconds=1.5, user_classes=[SpokenAnswers], stop_timeout_s=5)
        trace = {r["id"]: r for r in sim.trace()}
    answers = SpokenAnswers.answers
    assert answers and len(trace) == len(answers)
    for answer in answers:
        served = trace[answer.request_id]
        assert answer.ok and len(answer.text.split()) == 3 == len(answer.itl_s) + 1
        assert answer.record.output_s == served["answer"]["audio_s"] == pytest.approx(0.3)
    assert read_summary(tmp_path)["throughput"]["output_s"] == pytest.approx(0.3 * len(answers))


class OneTurnSessions(LLMUser):
    """A session of one turn after another, each on its own socket."""

    @task
    def ask(self):
        with self.llm.realtime.connect() as session:
            session.turn(text="one question")


def test_fault_kinds_counted_exactly(tmp_path):
    """The simulator's mid-stream faults on a WebSocket counted exactly as injected (`assert_faults_counted`)."""
    assert_faults_counted(tmp_path, OneTurnSessions, seed=5)


def test_a_frame_that_breaks_the_protocol_fails_the_turn_as_a_bad_stream():
    """A server that answers the handshake, then sends a frame of a reserved opcode: the turn fails as `bad_stream`
    (wsproto's protocol error), reported like any failure, not raised into the scenario."""
    patches.install()
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _address = listener.accept()
        ws = WSConnection(ConnectionType.SERVER)
        while not any(isinstance(event, Request) for event in ws.events()):
            ws.receive_data(conn.recv(65536))
        conn.sendall(ws.send(AcceptConnection()))
        conn.recv(65536)  # the turn's events
        conn.sendall(b"\x8f\x00")  # FIN, opcode 0xF: reserved
        conn.recv(65536)

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    watchdog = TimeoutWatchdog(10.0, 30.0)
    ws = WebSocket(f"ws://127.0.0.1:{listener.getsockname()[1]}/v1/realtime", {})
    record = ws.exchange(realtime.turn({"text": "hi"}), RequestRecord("realtime", 0.0), realtime.apply_event, watchdog)
    ws.close()
    watchdog.stop()
    listener.close()
    assert record.error_kind is ErrorKind.BAD_STREAM, record.error_message
    assert record.error_message == "WebSocket: 1002 Invalid opcode 0xf"
