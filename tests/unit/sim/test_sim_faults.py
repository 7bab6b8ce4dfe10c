"""The simulator's fault picker and `--fault` option (pure parts; the faults on the wire are in
tests/integration/test_faults.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter

import pytest

from llm_locust.sim.faults import KINDS, FaultPicker, FaultSpecError, parse_fault


def test_parse_fault():
    assert parse_fault("http_429=0.05") == ("http_429", 0.05)
    assert parse_fault(" cut =1") == ("cut", 1.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [("bogus=0.1", "unknown fault kind 'bogus'"), ("cut", "PROBABILITY"), ("cut=x", "PROBABILITY"),
     ("cut=1.5", "in [0, 1]"), ("cut=-0.1", "in [0, 1]"), ("cut=nan", "in [0, 1]")],
)  # fmt: skip
def test_parse_fault_rejects(text, message):
    with pytest.raises(FaultSpecError, match=re.escape(message)):
        parse_fault(text)


def test_probabilities_must_not_exceed_one():
    with pytest.raises(FaultSpecError, match=r"add up to 1\.2"):
        FaultPicker([("cut", 0.7), ("reset", 0.5)], seed=0)


def test_picker_rates_and_seed():
    picker = FaultPicker([("http_429", 0.1), ("cut", 0.2)], seed=3)
    draws = [picker.pick() for _ in range(20_000)]
    counts = Counter(draws)
    assert set(counts) == {None, "http_429", "cut"}
    assert abs(counts["http_429"] / 20_000 - 0.1) < 0.01 and abs(counts["cut"] / 20_000 - 0.2) < 0.015
    again = FaultPicker([("http_429", 0.1), ("cut", 0.2)], seed=3)
    assert [again.pick() for _ in range(20_000)] == draws  # same seed, same faults, same order
    assert not FaultPicker([], seed=0).active and FaultPicker([], seed=0).pick() is None
    assert FaultPicker([(k, 1 / len(KINDS)) for k in KINDS], seed=0).active


def test_bad_fault_option_is_a_one_line_usage_error():
    command = [
        sys.executable,
        "-m",
        "llm_locust.cli",
        "sim",
        "--port",
        "0",
        "--fault",
        "cut=0.7",
        "--fault",
        "reset=0.5",
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "llm-locust sim: error: --fault probabilities add up to 1.2; their sum must be at most 1"
    ]
