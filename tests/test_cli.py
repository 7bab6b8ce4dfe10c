"""The console script: sub-commands answer, and the README documents every option the code has."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from conftest import LOCUSTFILE, ROOT


def llm_locust(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "llm_locust.cli", *args], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_readme_options_table_is_exactly_the_options_of_the_code():
    listed = set(re.findall(r"\[(--[a-z0-9-]+)", llm_locust("options")))
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Options") : readme.index("### `llm-locust sim`")]
    documented = set(re.findall(r"^\| `(--[a-z0-9-]+)", section, flags=re.M))
    assert listed == documented
    assert len(listed) >= 12


def test_sub_commands_have_help():
    assert "--ttft-ms" in llm_locust("sim", "--help")
    assert "--run-time-s" in llm_locust("demo", "--help")


def test_bad_option_is_one_line_and_exit_code_2():
    command = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "-t", "1s",
               "--host", "http://127.0.0.1:9", "--extra-body", "{bad"]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert "--extra-body is not valid JSON" in proc.stderr and "Traceback" not in proc.stderr


def test_demo_end_to_end(tmp_path):
    """What `make demo` runs: simulator, master + 2 worker processes, results folder, table last."""
    out = llm_locust("demo", "--run-time-s", "4", "--users", "8", "--results-dir", str(tmp_path))
    assert {p.name for p in tmp_path.iterdir()} >= {"summary.json", "llm_timeseries.csv", "locust_stats.csv"}
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["run"]["workers_max"] == 2 and summary["throughput"]["requests_ok"] > 0
    assert summary["failures"] == {}
    tail = out[out.rindex("LLM metric") :]
    assert "TTFT ms" in tail and f"Results folder: {tmp_path}" in tail
    assert out.rstrip().endswith(f"Report: {tmp_path / 'report.html'}") and (tmp_path / "report.html").exists()
