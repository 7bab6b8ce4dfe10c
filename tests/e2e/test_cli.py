"""The console script: sub-commands answer, and README.md and docs/ document what the code has.

The documentation checks read the real `--help` of each command and the files of a real run,
never a list kept beside them.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import LOCUSTFILE, ROOT

from llm_locust.demo import SLO as DEMO_SLO

DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS]


def llm_locust(*args: str, timeout_s: float = 30, stderr: bool = False) -> str:
    """Run `llm-locust ARGS`; its stdout (and stderr after it when `stderr`), asserting exit code 0."""
    proc = subprocess.run([sys.executable, "-m", "llm_locust.cli", *args], capture_output=True, text=True,
                          timeout=timeout_s)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout + (proc.stderr if stderr else "")


def section(path: Path, heading: str) -> str:
    """The text of `path` under `heading` (a whole heading line), up to the next heading of its level or higher."""
    text = path.read_text()
    start = text.index(f"\n{heading}\n")
    level = heading.split(" ", 1)[0]
    end = re.compile(rf"^#{{1,{len(level)}}} ", flags=re.M).search(text, start + len(heading) + 2)
    return text[start : end.start() if end else len(text)]


def documented_options(text: str) -> list[str]:
    """Every option named in the first cell of a table row of `text`, in order (repeats kept)."""
    cells = re.findall(r"^\| ([^|]*)\|", text, flags=re.M)
    return [option for cell in cells for option in re.findall(r"(--[a-z0-9][a-z0-9-]*)", cell)]


def help_options(help_text: str) -> set[str]:
    """The options an argparse `--help` lists (one per option line), without --help itself."""
    found = re.findall(r"^  (?:-\w(?: \S+)?, )?(--[a-z0-9][a-z0-9-]*)", help_text, flags=re.M)
    return set(found) - {"--help"}


def assert_table_matches(documented: list[str], listed: set[str]) -> None:
    duplicates = sorted({o for o in documented if documented.count(o) > 1})
    assert not duplicates, f"documented twice: {duplicates}"
    assert set(documented) == listed, (
        f"in the code only: {sorted(listed - set(documented))}; in the docs only: {sorted(set(documented) - listed)}"
    )


def test_options_doc_is_exactly_the_options_of_the_code():
    listed = set(re.findall(r"\[(--[a-z0-9-]+)", llm_locust("options")))
    assert len(listed) >= 12
    assert_table_matches(documented_options(section(ROOT / "docs/options.md", "## Options of `locust`")), listed)


def test_sub_command_docs_are_exactly_their_help():
    for command, page, heading in (
        ("sim", "docs/simulator.md", "## Options"),
        ("demo", "docs/options.md", "## `llm-locust demo`"),
        ("report", "docs/options.md", "## `llm-locust report`"),
        ("compare", "docs/options.md", "## `llm-locust compare`"),
        ("history", "docs/options.md", "## `llm-locust history`"),
    ):
        listed = help_options(llm_locust(command, "--help"))
        assert len(listed) >= 4, command
        assert_table_matches(documented_options(section(ROOT / page, heading)), listed)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of every heading of a Markdown file (a repeated heading gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+)$", prose(path), flags=re.M):
        base = slug(heading)
        seen[base] = seen.get(base, -1) + 1
    return {f"{base}-{n}" if n else base for base, count in seen.items() for n in range(count + 1)}


def prose(path: Path) -> str:
    """`path`'s text without its fenced code blocks (a '#' there is a comment, not a heading)."""
    return re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S)


def test_every_relative_link_points_to_an_existing_file_and_anchor():
    checked = 0
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", prose(page)):
            if re.match(r"[a-z]+:", target):
                continue  # http(s):, mailto:
            file_part, _, anchor = target.partition("#")
            linked = (page.parent / file_part).resolve() if file_part else page
            where = f"{page.relative_to(ROOT)}: link {target}"
            assert linked.exists(), f"{where}: no such file"
            if anchor:
                assert linked.suffix == ".md" and anchor in anchors(linked), f"{where}: no such heading"
            checked += 1
    assert checked >= 20


def test_readme_links_every_page_of_docs():
    readme = (ROOT / "README.md").read_text()
    assert DOCS
    assert [d.name for d in DOCS if f"(docs/{d.name}" not in readme] == []


def test_every_make_target_named_exists():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][\w-]*):", makefile, flags=re.M))
    named = {(page.name, t) for page in PAGES for t in re.findall(r"(?:`|^)make ([a-z][\w-]*)", page.read_text(), re.M)}
    assert {"demo", "test"} <= {t for _, t in named}
    assert sorted((page, t) for page, t in named if t not in targets) == []


def test_every_repository_path_named_exists():
    top = "llm_locust|locustfiles|tests|benchmarks|deploy|engine|docs|\\.ci"
    missing = []
    for page in PAGES:
        for path in re.findall(rf"(?<![\w./-])((?:{top})/[\w.-]*(?:/[\w.-]+)*)", page.read_text()):
            if ".venv" not in path and not (ROOT / path).exists():
                missing.append(f"{page.relative_to(ROOT)}: {path}")
    assert missing == []


def test_bad_option_is_one_line_and_exit_code_2():
    command = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "-t", "1s",
               "--host", "http://127.0.0.1:9", "--extra-body", "{bad"]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert "--extra-body is not valid JSON" in proc.stderr and "Traceback" not in proc.stderr


def test_demo_end_to_end(tmp_path):
    """What `make demo` runs, shortened to two steps: simulator, master + 2 worker processes, a sweep, results
    folder, steps table and capacity line last. Every file, CSV column and summary.json section it wrote is documented
    in docs/results.md."""
    out = llm_locust("demo", "--sweep-users", "1,2", "--step-duration-s", "3", "--results-dir", str(tmp_path),
                     timeout_s=90)  # fmt: skip
    assert {p.name for p in tmp_path.iterdir()} >= {"summary.json", "llm_timeseries.csv", "locust_stats.csv"}
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["run"]["workers_max"] == 2 and summary["throughput"]["requests_ok"] > 0
    assert summary["failures"] == {} and [s["users"] for s in summary["steps"]] == [1, 2]
    tail = out[out.rindex(f"Results folder: {tmp_path}") :]
    table = tail[tail.index("users   req/s") :].splitlines()
    assert [line.split()[0] for line in table[1:3]] == ["1", "2"]
    assert f"Capacity under {DEMO_SLO}: " in tail
    assert out.rstrip().endswith(f"Report: {tmp_path / 'report.html'}") and (tmp_path / "report.html").exists()


@pytest.mark.slow
def test_demo_draws_the_curve_with_its_knee_and_warns_of_nothing(tmp_path):
    """`make demo` as it is: six steps, the steps table and the capacity line; its report's first chart is latency
    against throughput with a point per step and the knee marked; no warning (on an idle machine)."""
    out = llm_locust("demo", "--results-dir", str(tmp_path), timeout_s=240, stderr=True)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [s["users"] for s in summary["steps"]] == [1, 2, 4, 8, 16, 32]
    assert summary["warnings"] == [] and "WARNING" not in out and "Traceback" not in out, summary["warnings"]
    assert f"Capacity under {DEMO_SLO}: " in out
    page = (tmp_path / "report.html").read_text()
    charts = re.findall(r'<script type="application/json" data-chart="([^"]+)">(.*?)</script>', page, re.S)
    key, data = charts[0]
    assert key == "throughput_latency"
    traces = json.loads(data)["data"]
    (curve,) = [t for t in traces if t["meta"] == {"run": tmp_path.name, "metric": "e2e_ms", "stat": "p50"}]
    assert len(curve["text"]) >= 6
    knees = [t for t in traces if "knee" in t["meta"]]
    assert knees and {t["meta"]["knee"] for t in knees} <= set(curve["text"])

    results_doc = (ROOT / "docs/results.md").read_text()
    kinds_doc = (ROOT / "docs/metrics.md").read_text()
    names = {p.name + ("/" if p.is_dir() else "") for p in tmp_path.iterdir()}
    for name in ("llm_timeseries.csv", "workers_timeseries.csv"):
        with (tmp_path / name).open() as f:
            names |= {c for c in next(csv.reader(f)) if not c.startswith("failed_")}
            f.seek(0)
            kinds = {c.removeprefix("failed_") for c in next(csv.reader(f)) if c.startswith("failed_")}
            assert all(f"| `{kind}` |" in kinds_doc for kind in kinds)
    names |= set(summary) | {f"run.{key}" for key in summary["run"]} | set(summary["metrics"])
    assert sorted(n for n in names if f"`{n}`" not in results_doc) == []
