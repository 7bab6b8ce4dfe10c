"""A results write that fails (`results.outcome.write_failure`, `files.write_summary`): pure, on a removed folder
(the runs: tests/integration/test_write_failures.py)."""

from __future__ import annotations

import os

import pytest

from llm_locust.results.files import write_summary
from llm_locust.results.outcome import EXIT_WRITE_FAILED, write_failure


def test_a_json_document_over_a_removed_folder_is_not_written_and_the_line_names_it(tmp_path):
    gone = tmp_path / "gone"
    with pytest.raises(OSError) as failed:
        write_summary(gone, {"status": "complete"})
    assert os.listdir(tmp_path) == []  # the folder is not made again, no temp file
    assert write_failure(gone / "summary.json", failed.value) == (
        f"cannot write {gone / 'summary.json'}: No such file or directory — the load is stopped; summary.json keeps "
        f"what was measured if it can still be written, whole (exit code {EXIT_WRITE_FAILED})"
    )
