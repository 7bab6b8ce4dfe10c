"""Speech to text measured against the simulator: locustfiles/transcriptions.py through the `locust` CLI — master + 2
worker processes — over HTTP and HTTPS (each request a multipart upload of its spoken prompt), streamed and not: 0
failures, the requests and tokens the simulator's trace holds, TTFT and the gaps between text deltas (streamed) or E2E
against the simulator's own times; a scenario's `self.llm.audio.transcriptions.create(...)` with `name=`,
`catch_response` and `score=`, streamed and not; the word error rate under load against the simulator's share of
wrong words."""

from __future__ import annotations

import csv

import pytest
from conftest import ROOT, options, read_summary, run_local, run_locust
from harness.trace_agreement import (
    assert_within,
    first_output_pairs,
    percentile,
    request_lines,
    served_gaps_ms,
    steady,
    tls_args,
)
from locust import task

from llm_locust.apis.transcriptions import heard_right, speech_wav
from llm_locust.report.build import build_report
from llm_locust.report.run_data import load_run
from llm_locust.report.tables import step_rows
from llm_locust.results.console import summary_table
from llm_locust.runtime.users import LLMUser
from llm_locust.sim import run_sim

LOCUSTFILE = ROOT / "locustfiles" / "transcriptions.py"
TTFT_MS, ITL_MS, WORDS, REQUESTS = 30, 4, 20, 120


def run(sim, tmp_path, *args: str):
    """`REQUESTS` requests of locustfiles/transcriptions.py from master + 2 worker processes against `sim`, each
    written to requests.jsonl; the run's summary, its lines and the simulator's trace by id."""
    proc = run_locust(LOCUSTFILE, "--host", sim.url, "-u", "4", "-r", "4", "-t", "60s", "--processes", "2",
                      "--max-requests", str(REQUESTS), "--prompt-tokens", str(WORDS), "--requests-jsonl",
                      "--results-dir", str(tmp_path), *args)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    trace = sim.trace()
    summary = read_summary(tmp_path)
    t = summary["throughput"]
    assert summary["failures"] == {} and t["requests_ok"] == len(trace) == REQUESTS
    assert summary["run"]["role"] == "master" and summary["run"]["workers_max"] == 2
    # each request spoke its prompt: WORDS words, 8 s of audio (50 audio tokens a second), heard back word for word
    assert {r["completion_tokens"] for r in trace} == {WORDS} and t["output_tokens"] == WORDS * REQUESTS
    assert {r["prompt_tokens"] for r in trace} == {WORDS / 2.5 * 50} and t["prompt_tokens"] == 400 * REQUESTS
    assert summary["tokens"]["sources"] == {"usage": REQUESTS}
    # the audio's seconds (the WAV header, read by the client and the simulator alike) exactly; the real-time factor,
    # E2E over them, within 2 % of the simulator's own (its t_done − t_recv over the seconds it heard): the client's E2E
    # also holds each 256 KB upload and, on a loaded machine (load 16-20 on 2 cores), a few late reads — measured
    # +0.2 % to +1.3 % there, so 1 % is not held
    served_s = sum(r["answer"]["audio_s"] for r in trace)
    assert t["input_s"] == pytest.approx(served_s, rel=1e-6) == pytest.approx(WORDS / 2.5 * REQUESTS)
    assert t["input_s_per_s"] == pytest.approx(t["input_s"] / t["duration_s"], rel=1e-3)
    served_rtf = sum(r["t_done"] - r["t_recv"] for r in trace) / served_s
    print(f"real-time factor {t['real_time_factor']:.5f}, the simulator's {served_rtf:.5f}")
    assert t["real_time_factor"] == pytest.approx(served_rtf, rel=0.02)
    with (tmp_path / "llm_timeseries.csv").open() as csv_file:  # per window: audio seconds per second, the factor
        windows = [row for row in csv.DictReader(csv_file) if row["requests_ok"] != "0"]
    assert windows and all(
        float(row["input_s_per_s"]) > 0 and 0 < float(row["real_time_factor"]) < 1 for row in windows
    )
    # the displays show them in the audio's units beside the output tokens: the console, the report's steps table
    table = summary_table(summary)
    assert f"{t['input_s_per_s']:.1f} audio in s/s, {t['real_time_factor']:.3f} RTF" in table, table
    steps = step_rows(load_run(tmp_path)).iloc[0]
    assert steps["input_s_per_s"] == t["input_s_per_s"] and steps["real_time_factor"] == t["real_time_factor"]
    assert steps["output_tokens_per_s"] == t["output_tokens_per_s"]
    lines = request_lines(tmp_path)
    served = {r["id"]: r for r in trace}
    assert {line["request_id"] for line in lines} == set(served)
    return summary, lines, served


def steady_enough(lines: list[dict]) -> list[dict]:
    """The requests sent once every user's connection is up (`trace_agreement.steady`), a third of them at least."""
    kept = steady(lines)
    assert len(kept) >= REQUESTS // 3
    return kept


@pytest.mark.alone  # TTFT and ITL within 1 ms of the trace
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_streamed_transcriptions_through_master_and_two_workers(tmp_path, pki, scheme):
    """TTFT (the first text delta) and every gap between deltas against the simulator's write times."""
    served_tls, trust = tls_args(pki, scheme)
    with run_sim("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS), *served_tls) as sim:
        assert sim.url.startswith(f"{scheme}://")
        summary, lines, served = run(sim, tmp_path, *trust)
    m = summary["metrics"]
    truth_itl_ms = served_gaps_ms(list(served.values()))
    assert m["itl_ms"]["count"] == len(truth_itl_ms) == (WORDS - 1) * REQUESTS and m["ttfo_ms"]["count"] == REQUESTS
    kept = steady_enough(lines)
    ours_ms, truth_ms = first_output_pairs(kept, served)
    figures = {
        "ttft p50": (percentile(ours_ms, 0.5), percentile(truth_ms, 0.5)),
        "ttft p99": (percentile(ours_ms, 0.99), percentile(truth_ms, 0.99)),
        "itl p50": (m["itl_ms"]["p50"], percentile(truth_itl_ms, 0.5)),
        "itl p99": (m["itl_ms"]["p99"], percentile(truth_itl_ms, 0.99)),
    }
    uploads_ms = [(line["t_uploaded"] - line["t_send"]) * 1e3 for line in kept]
    upload_ms, upload_p99_ms = percentile(uploads_ms, 0.5), percentile(uploads_ms, 0.99)
    print(scheme, {key: (round(ours, 3), round(truth, 3)) for key, (ours, truth) in figures.items()}, len(kept),
          f"upload p50 {upload_ms:.3f} ms")  # fmt: skip
    # the gaps within 1 ms at p50, 3 ms at p99; TTFT's p50 within 1 ms plus the median upload of the 256 KB audio
    # (`t_uploaded` − `t_send`: over HTTPS its encryption too — the client's time before the simulator can see the
    # request); TTFT's p99 within 3 ms plus the p99 upload. (Its p99 once moved by up to 70 ms: a worker's loop stalled
    # by numpy's first import of numpy.ma at its first report — imported up front now.)
    bounds_ms = {"ttft p50": 1.0 + upload_ms, "ttft p99": 3.0 + upload_p99_ms, "itl p50": 1.0, "itl p99": 3.0}
    for key, bound_ms in bounds_ms.items():
        ours, truth = figures[key]
        assert abs(ours - truth) <= bound_ms, (key, figures)


@pytest.mark.alone  # E2E within 1 ms of the trace
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_transcriptions_not_streamed_through_master_and_two_workers(tmp_path, pki, scheme):
    """`--extra-body '{"stream": false}'`: one JSON body per request, its latency E2E, against the simulator's."""
    served_tls, trust = tls_args(pki, scheme)
    with run_sim("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS), *served_tls) as sim:
        summary, lines, served = run(sim, tmp_path, "--extra-body", '{"stream": false}', *trust)
    m = summary["metrics"]
    assert m["ttft_ms"]["count"] == m["itl_ms"]["count"] == 0  # not streamed: its latency is E2E
    page = build_report([tmp_path], tmp_path / "report.html", png=False).html_path.read_text()
    assert "audio in s/s" in page and "RTF" in page and "audio out s/s" not in page
    assert {r["stream"] for r in served.values()} == {False}
    ours_ms = [(line["t_done"] - line["t_send"]) * 1e3 for line in lines]
    truth_ms = [(served[line["request_id"]]["t_head"] - served[line["request_id"]]["t_recv"]) * 1e3 for line in lines]
    kept = [i for i, line in enumerate(lines) if line in steady_enough(lines)]
    figures = {
        "e2e p50": (percentile(ours_ms, 0.5), percentile(truth_ms, 0.5)),
        "e2e p99 (connections up)": (percentile([ours_ms[i] for i in kept], 0.99),
                                     percentile([truth_ms[i] for i in kept], 0.99)),
    }  # fmt: skip
    assert m["e2e_ms"]["count"] == REQUESTS and m["e2e_ms"]["p50"] == pytest.approx(figures["e2e p50"][0], abs=0.2)
    # within 1 ms at p50, 3 ms at p99, as rerank's: a body whole with its head is timed at the head's kernel arrival
    # (it was timed when its greenlet got to it, 100-220 ms late on a loaded machine)
    assert_within(figures, scheme)


AUDIO = speech_wav("the quick brown fox jumps over the lazy dog")


class TranscriptionScenario(LLMUser):
    """A scenario sending its own audio, as an openai SDK application would."""

    answers: list = []
    stream = False

    @task
    def transcribe(self):
        with self.llm.audio.transcriptions.create(
            file=("fox.wav", AUDIO, "audio/wav"), language="en", stream=self.stream, name="fox", catch_response=True,
            score=lambda answer: answer.text.split()[-1] == "dog",
        ) as answer:  # fmt: skip
            if "fox" not in answer.text:
                answer.failure("no fox")
            TranscriptionScenario.answers.append(answer)


@pytest.mark.parametrize("stream", [False, True])
def test_a_scenario_transcribes_its_own_audio(tmp_path, monkeypatch, stream):
    TranscriptionScenario.answers = []
    monkeypatch.setattr(TranscriptionScenario, "stream", stream)
    with run_sim("--ttft-ms", "10", "--itl-ms", "2") as sim:
        opts = options("--host", sim.url, "--results-dir", str(tmp_path))
        run_local(opts, users=2, seconds=1.5, user_classes=[TranscriptionScenario], stop_timeout_s=5)
        trace = {r["id"]: r for r in sim.trace()}
    answers = TranscriptionScenario.answers
    assert answers and all(answer.ok for answer in answers) and len(answers) == len(trace)
    for answer in answers:
        assert answer.text == "the quick brown fox jumps over the lazy dog" and answer.score == 1.0
        assert answer.usage.completion_tokens == 9 and trace[answer.request_id]["completion_tokens"] == 9
        assert trace[answer.request_id]["stream"] is stream and len(answer.itl_s) == (8 if stream else 0)
        assert (answer.ttft_s is not None) is stream
    summary = read_summary(tmp_path)
    (fox,) = summary["breakdowns"]["name"]
    assert (fox["label"], fox["requests_ok"]) == ("fox", len(answers))
    assert summary["accuracy"]["scored"] == len(answers) and summary["accuracy"]["correct"] == len(answers)


SAID = " ".join(f"word{i}" for i in range(40))
SPOKEN = speech_wav(SAID)


class WerScenario(LLMUser):
    """A scenario scoring each transcript by its word error rate against the words it spoke (`heard_right`)."""

    @task
    def transcribe(self):
        self.llm.audio.transcriptions.create(file=("said.wav", SPOKEN), stream=True, score=heard_right(SAID))


@pytest.mark.parametrize("processes", [False, True])
def test_word_error_rate_under_load_measures_the_simulators_share_of_wrong_words(tmp_path, processes):
    """The simulator hears each word wrong with probability 0.2 (`--accuracy 0.8`): the run's accuracy (1 − the mean
    WER, jiwer's) is 1 − the share of wrong words its trace counts, exactly, and within three standard errors of 0.8;
    in a local runner and through --processes 2."""
    with run_sim("--ttft-ms", "10", "--itl-ms", "1", "--accuracy", "0.8", "--answer-seed", "5") as sim:
        if processes:
            locustfile = tmp_path / "wer.py"
            locustfile.write_text(
                "from locust import events, task\nfrom llm_locust.runtime.plugin import install\n"
                "from llm_locust.runtime.users import LLMUser\nfrom llm_locust.apis.transcriptions import heard_right,"
                " speech_wav\ninstall(events)\nSAID = " + repr(SAID) + "\nSPOKEN = speech_wav(SAID)\n\n\n"
                "class WerScenario(LLMUser):\n    @task\n    def transcribe(self):\n"
                "        self.llm.audio.transcriptions.create(file=('said.wav', SPOKEN), stream=True,"
                " score=heard_right(SAID))\n"
            )  # fmt: skip
            proc = run_locust(locustfile, "--host", sim.url, "-u", "4", "-r", "4", "-t", "60s", "--processes", "2",
                              "--max-requests", "150", "--results-dir", str(tmp_path))  # fmt: skip
            assert proc.returncode == 0, proc.stderr[-3000:]
        else:
            opts = options("--host", sim.url, "--results-dir", str(tmp_path))
            run_local(opts, users=4, seconds=2.5, user_classes=[WerScenario], stop_timeout_s=5)
        trace = sim.trace()
    accuracy = read_summary(tmp_path)["accuracy"]
    wrong, words = sum(r["answer"]["wrong_words"] for r in trace), 40 * len(trace)
    assert accuracy["scored"] == len(trace) >= 60
    assert accuracy["accuracy"] == pytest.approx(1 - wrong / words, abs=1e-6)  # every error a substitution
    stderr = (0.2 * 0.8 / words) ** 0.5  # of the share of wrong words, over every word heard
    print(f"WER {1 - accuracy['accuracy']:.4f} (wrong words {wrong}/{words}), configured 0.2 ± {stderr:.4f}")
    assert abs((1 - accuracy["accuracy"]) - 0.2) <= 3 * stderr
