"""Speech to text against a real server: faster-whisper-server with whisper-base (int8, one thread, engine/whisper.py)
transcribing sentences spoken offline by espeak-ng, sent by a scenario (`spoken.py`) with their reference texts.

A run of `REQUESTS` requests, one user (the server transcribes one request at a time: a second user would only
queue): no failure; the server's access log holds as many transcriptions as the client counted; the audio's seconds
are the clips' durations summed over the requests; the real-time factor is their E2E over those seconds; the run's
accuracy, 1 − the mean word error rate, is an exact recount of the answers rescored offline, and a real measurement:
every transcript non-empty, most words heard right.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import wave
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, read_summary, run_locust

from engine.whisper import SERVED_NAME, run_whisper_server
from llm_locust.apis.transcriptions import SAMPLE_RATE, word_error_rate

pytestmark = pytest.mark.engine

REQUESTS = 6
SENTENCES = {  # name -> what espeak-ng says: plain words (whisper writes numbers as digits)
    "fox": "the quick brown fox jumps over the lazy dog",
    "rain": "it will rain in the city this afternoon",
    "train": "please wait for the next train at the station",
}
POST_LINE = re.compile(rb'"POST /v1/audio/transcriptions HTTP/1\.1" 200')


def speak(text: str, path: Path) -> float:
    """Write `text` spoken by espeak-ng (American English) to `path` as a 16 kHz, 16-bit mono WAV, resampled from
    espeak-ng's 22,050 Hz by the FFT (band-limited); its duration, seconds."""
    spoken = path.with_suffix(".espeak.wav")
    subprocess.run(["espeak-ng", "-v", "en-us", "-w", str(spoken), text], check=True, capture_output=True)
    with wave.open(str(spoken), "rb") as wav:
        rate, samples = wav.getframerate(), np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")
    frames = round(len(samples) * SAMPLE_RATE / rate)
    resampled = np.fft.irfft(np.fft.rfft(samples.astype(np.float64))[: frames // 2 + 1], frames) * frames / len(samples)
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(SAMPLE_RATE)
        wav.writeframes(np.clip(np.rint(resampled), -32768, 32767).astype("<i2").tobytes())
    return frames / SAMPLE_RATE


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> tuple[Path, dict[str, float]]:
    """The sentences spoken into WAVs (`<name>.wav`) in a folder with the scenario's list of them (clips.json); each
    clip's seconds."""
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng not installed: no spoken audio (apt-get install espeak-ng; make test-engine does)")
    folder = tmp_path_factory.mktemp("spoken")
    seconds = {name: speak(text, folder / f"{name}.wav") for name, text in SENTENCES.items()}
    listed = [[name, str(folder / f"{name}.wav"), text] for name, text in SENTENCES.items()]
    (folder / "clips.json").write_text(json.dumps(listed))
    return folder, seconds


@pytest.fixture(scope="module")
def transcribed(whisper, clips, tmp_path_factory):
    """One run of the scenario against the server: (summary, requests.jsonl's lines, each clip's seconds, the
    server's count of transcriptions it answered)."""
    spoken, seconds = clips
    folder = tmp_path_factory.mktemp("stt")
    results = folder / "run"
    with run_whisper_server(whisper, folder / "whisper-server.log") as server:
        warm = server.transcribe((spoken / "fox.wav").read_bytes())  # the server loads its model at its first request
        assert warm.strip(), f"the warm-up transcript is empty; log: {server.log_path}"
        done = run_locust(
            ROOT / "tests" / "engine_tier" / "spoken.py", "--host", server.url, "--model", SERVED_NAME,
            "-u", "1", "-r", "1", "--max-requests", str(REQUESTS), "-t", "90s", "--only-summary",
            "--requests-jsonl", "--results-dir", str(results),
            timeout_s=150, env={**os.environ, "LLM_LOCUST_SPOKEN_CLIPS": str(spoken / "clips.json")},
        )  # fmt: skip
        served = len(POST_LINE.findall(server.log_path.read_bytes())) - 1  # the warm-up's left out
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in (results / "requests.jsonl").read_text().splitlines()]
    return read_summary(results), lines, seconds, served


def test_a_real_server_transcribes_spoken_clips_under_load(transcribed):
    summary, lines, seconds, served = transcribed
    t, metrics = summary["throughput"], summary["metrics"]
    assert summary["status"] == "complete" and summary["failures"] == {}
    assert t["requests_ok"] == len(lines) == served == REQUESTS
    assert {line["outcome"] for line in lines} == {"ok"}
    # the audio's seconds: each request's clip, from its WAV header
    assert t["input_s"] == pytest.approx(sum(seconds[line["name"]] for line in lines), rel=1e-6)
    # not streamed: the latency is E2E, and the real-time factor is the requests' E2E over their audio's seconds
    assert metrics["ttft_ms"]["count"] == 0 and metrics["e2e_ms"]["count"] == REQUESTS
    e2e_s = [line["t_last"] - line["t_send"] for line in lines]
    assert t["real_time_factor"] == pytest.approx(sum(e2e_s) / t["input_s"], rel=1e-4)
    # 1 − the mean WER, each answer rescored offline against its sentence; every transcript has words
    answers = [(line["name"], line["answer"]) for line in lines]
    assert all(answer.split() for _, answer in answers), answers
    scores = [max(0.0, 1.0 - word_error_rate(SENTENCES[name], answer)) for name, answer in answers]
    assert [line["score"] for line in lines] == pytest.approx(scores, abs=1e-9)
    accuracy = summary["accuracy"]
    assert accuracy["scored"] == REQUESTS and accuracy["accuracy"] == pytest.approx(sum(scores) / REQUESTS, abs=1e-6)
    print(f"E2E p50 {metrics['e2e_ms']['p50']:.0f} ms, real-time factor {t['real_time_factor']:.3f}, audio "
          f"{t['input_s']:.2f} s, accuracy {accuracy['accuracy']:.3f}; heard: {sorted(set(answers))}")  # fmt: skip
    assert accuracy["accuracy"] >= 0.6, answers  # whisper-base hears espeak-ng's words: most of them right
