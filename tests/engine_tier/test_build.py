"""engine/build.sh: a complete cache is left alone; a failing step is one line, non-zero, and
leaves no part of the cache behind."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.engine

BUILD = ROOT / "engine" / "build.sh"


def test_a_complete_cache_is_only_listed(engine):
    before = {path: path.stat().st_mtime_ns for path in (engine.server, engine.model, engine.tokenizer)}
    done = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "cache complete, nothing to do" in done.stdout
    for path in before:
        assert str(path) in done.stdout
        assert path.stat().st_mtime_ns == before[path]


def test_no_registry_is_one_line_and_no_half_built_cache(tmp_path):
    cache = tmp_path / "cache"
    env = {
        **os.environ,
        "LLM_LOCUST_ENGINE_DIR": str(cache),
        "PYTHON": sys.executable,
        "PIP_CONFIG_FILE": os.devnull,  # no configured indexes or local wheel folders
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple",  # nothing listens there
        "PIP_EXTRA_INDEX_URL": "",
        "PIP_FIND_LINKS": "",
        "PIP_NO_INDEX": "",
        "PIP_RETRIES": "0",
        "PIP_TIMEOUT": "5",
    }
    done = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 1
    errors = done.stderr.strip().splitlines()
    assert len(errors) == 1 and errors[0].startswith("engine: FAILED: installing gguf"), done.stderr
    assert "from the package registry" in errors[0] and str(cache / "logs") in errors[0]
    assert {path.name for path in cache.iterdir()} == {"logs", ".lock"}  # no venv, no temporary folder


def test_a_missing_python_is_one_line(tmp_path):
    env = {**os.environ, "LLM_LOCUST_ENGINE_DIR": str(tmp_path / "cache"), "PYTHON": "/nonexistent/python3"}
    done = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 1
    assert done.stderr.strip() == "engine: FAILED: /nonexistent/python3 not found (set PYTHON=/path/to/python3)"
