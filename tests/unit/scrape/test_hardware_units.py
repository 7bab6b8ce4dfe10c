"""The node-exporter reader's CPU busy %: pure counter arithmetic, including the kernel's idle ticks stepping back."""

import pytest
from prometheus_client.parser import text_string_to_metric_families

from llm_locust.scrape.hardware import NodeReader, cpu_seconds


def test_cpu_seconds_split_busy_and_idle():
    before = {"cpu_all_s": 100.0, "cpu_idle_s": 80.0}
    after = {"cpu_all_s": 104.0, "cpu_idle_s": 81.0}
    assert cpu_seconds(before, after) == (3.0, 1.0)


def test_idle_stepping_back_keeps_the_rate():
    """Idle (and so the sum over all modes) a tick lower than before: the interval counts no idle time and its
    busy time, where the old code lost the rate (the sum stepped back, so it had no delta of all seconds)."""
    before = {"cpu_all_s": 100.0, "cpu_idle_s": 80.0}
    after = {"cpu_all_s": 99.99, "cpu_idle_s": 79.98}
    busy_s, idle_s = cpu_seconds(before, after)
    assert idle_s == 0.0 and busy_s == pytest.approx(0.01)


def _page(idle_s: float, user_s: float) -> dict:
    text = (
        "# TYPE node_cpu_seconds_total counter\n"
        f'node_cpu_seconds_total{{cpu="0",mode="idle"}} {idle_s}\n'
        f'node_cpu_seconds_total{{cpu="0",mode="user"}} {user_s}\n'
    )
    return {family.name: family for family in text_string_to_metric_families(text)}


def _busy(triples: list) -> float | None:
    return next((v for d, m, v in triples if m == "cpu_busy_pct"), None)


def test_node_reader_rates_every_scrape_after_the_first():
    reader = NodeReader()
    assert _busy(reader.read(_page(80.0, 20.0), 1.0)) is None  # no previous counters
    assert _busy(reader.read(_page(80.5, 21.5), 2.0)) == pytest.approx(75.0)
    assert _busy(reader.read(_page(80.49, 21.6), 3.0)) == pytest.approx(100.0)  # idle stepped back
    assert _busy(reader.read(_page(80.49, 21.6), 4.0)) is None  # no CPU time passed at all: no rate
