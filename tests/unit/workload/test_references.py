"""Dataset rows with a reference: the fields become the request's `Reference`, leave the body, and keep the answer."""

from __future__ import annotations

import orjson
import pytest
from conftest import options

from llm_locust.config.settings import Settings
from llm_locust.errors import ConfigError
from llm_locust.metrics.scoring import Reference
from llm_locust.workload.builder import Workload
from llm_locust.workload.datasets import REFERENCE, load_dataset


def write(tmp_path, *rows) -> str:
    path = tmp_path / "refs.jsonl"
    path.write_text("\n".join(orjson.dumps(row).decode() for row in rows), encoding="utf-8")
    return str(path)


def test_reference_fields_become_the_requests_reference_and_leave_its_body(tmp_path):
    schema = {"type": "object", "required": ["a"]}
    path = write(
        tmp_path,
        {"prompt": "2+2?", "expected": 4, "max_tokens": 5},
        {"messages": [{"role": "user", "content": "Pick"}], "choices": ["x", "y", "z"], "answer": 2},
        {"prompt": "json", "schema": schema, "regex": r"\d+"},
        {"prompt": "plain"},
    )
    rows = [conversation[0] for conversation in load_dataset(path, "")]
    assert rows[0] == {"prompt": "2+2?", "max_tokens": 5, REFERENCE: Reference(expected="4")}
    assert rows[1][REFERENCE] == Reference(choices=("x", "y", "z"), answer="C")
    assert rows[2][REFERENCE] == Reference(regex=r"\d+", schema=schema)
    assert REFERENCE not in rows[3]

    s = Settings.from_options(options("--host", "http://127.0.0.1:1", "--seed", "1", "--dataset", path))
    workload = Workload(s.workload, "chat", server_family=s.endpoint.server_family)
    specs = [workload.next_request("m") for _ in range(40)]
    with_reference = [spec for spec in specs if spec.reference is not None]
    assert with_reference and all(spec.keep_answer for spec in with_reference)
    assert not any(spec.keep_answer for spec in specs if spec.reference is None)
    for spec in specs:
        body = orjson.loads(spec.body)
        assert not {"expected", "regex", "choices", "answer", "schema", REFERENCE} & set(body)


@pytest.mark.parametrize(
    ("row", "why"),
    [
        ({"prompt": "p", "expected": ["4"]}, "'expected' must be a string or a number"),
        ({"prompt": "p", "regex": "(unclosed"}, "'regex' is not a valid regular expression"),
        ({"prompt": "p", "choices": "abc", "answer": "A"}, "'choices' must be a list"),
        ({"prompt": "p", "choices": ["a", "b"], "answer": "C"}, r"'answer' must be the right choice's letter \(A-B\)"),
        ({"prompt": "p", "choices": ["a", "b"], "answer": 2}, "'answer' must be"),
        ({"prompt": "p", "schema": "object"}, "'schema': a JSON schema must be an object"),
        ({"prompt": "p", "schema": {"type": 5}}, "'schema': not a valid JSON schema"),
    ],
)
def test_malformed_references_are_one_line_errors_naming_the_line_and_field(tmp_path, row, why):
    path = write(tmp_path, {"prompt": "fine"}, row)
    with pytest.raises(ConfigError, match=why) as e:
        load_dataset(path, "")
    assert f"{path}:2" in str(e.value) and "\n" not in str(e.value)
