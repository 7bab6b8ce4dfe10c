"""The report's header line of an open loop's send error per process (`tables.send_error_by_worker`)."""

from __future__ import annotations

from llm_locust.report.tables import send_error_by_worker


def test_a_closed_loop_has_no_send_error_line():
    assert send_error_by_worker({}) is None


def test_a_few_processes_are_each_listed():
    by_worker = {"w2": {"p50": 0.03, "p99": 0.9}, "w1": {"p50": 0.02, "p99": 0.5}}
    assert send_error_by_worker(by_worker) == "w1: p50 0.02 ms, p99 0.5 ms; w2: p50 0.03 ms, p99 0.9 ms"


def test_many_processes_show_the_one_with_the_highest_p99():
    by_worker = {f"w{i}": {"p50": 0.01, "p99": float(i)} for i in range(10)}
    assert send_error_by_worker(by_worker) == "highest p99 of 10 processes: w9: p50 0.01 ms, p99 9.0 ms"
