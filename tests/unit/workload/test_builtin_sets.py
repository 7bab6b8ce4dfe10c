"""Built-in offline sets (`--dataset builtin:NAME[:N]`) and structured outputs (`--response-format`, `--schema`):
items generated from the seed with their truth, and each API's own structured-output field in the body."""

from __future__ import annotations

import json
import re
from pathlib import Path

import orjson
import pytest
from conftest import options

from llm_locust.config.settings import Settings
from llm_locust.errors import ConfigError
from llm_locust.metrics.scoring import Reference, schema_valid
from llm_locust.workload.builder import Workload
from llm_locust.workload.builtin_sets import DEFAULT_ITEMS, builtin_items
from llm_locust.workload.datasets import REFERENCE, load_dataset
from llm_locust.workload.providers import check_api
from llm_locust.workload.structured import load_schema

HOST = ("--host", "http://127.0.0.1:1")
QUESTION = re.compile(r"(\d+) ([-+*]) (\d+)\?")


def value_of(prompt: str) -> int:
    """The value of the operation a built-in question asks about, recomputed from its text."""
    a, op, b = QUESTION.search(prompt).groups()  # type: ignore[union-attr]
    return {"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b)}[op]


def test_arithmetic_items_are_generated_from_the_seed_with_their_expected_number():
    items = builtin_items("builtin:arithmetic", 7)
    assert len(items) == DEFAULT_ITEMS and items == builtin_items("builtin:arithmetic", 7)
    assert items != builtin_items("builtin:arithmetic", 8)
    assert builtin_items("builtin:arithmetic", None) == builtin_items("builtin:arithmetic", 0)
    ops = set()
    for prompt, reference in items:
        assert prompt.endswith("? Answer with the number only.") and prompt.startswith("What is ")
        assert reference == Reference(expected=str(value_of(prompt))) and value_of(prompt) >= 0
        ops.add(QUESTION.search(prompt).group(2))  # type: ignore[union-attr]
    assert ops == {"+", "-", "*"}
    assert len(builtin_items("builtin:arithmetic:17", 7)) == 17


def test_choice_items_hold_the_truth_under_their_right_letter_among_four_distinct_options():
    letters_seen = set()
    for prompt, reference in builtin_items("builtin:choice:400", 3):
        options_shown = re.findall(r"^([A-D])\. (\d+)$", prompt, re.MULTILINE)
        assert [letter for letter, _ in options_shown] == list("ABCD") and prompt.endswith(
            "Answer with the letter only."
        )
        assert reference.choices == tuple(number for _, number in options_shown) and len(set(reference.choices)) == 4
        assert reference.choices["ABCD".index(reference.answer)] == str(value_of(prompt))  # type: ignore[arg-type]
        letters_seen.add(reference.answer)
    assert letters_seen == set("ABCD")


def test_json_items_carry_a_schema_their_prompt_describes():
    for prompt, reference in builtin_items("builtin:json:30", 1):
        schema = reference.schema
        assert schema is not None and schema["required"] == list(schema["properties"])
        assert all(f"{name} (" in prompt for name in schema["properties"])
        assert not schema_valid("{}", schema) and not schema_valid("words", schema)


def test_a_builtin_set_is_a_dataset_of_one_turn_prompts_with_references():
    conversations = load_dataset("builtin:arithmetic:5", "", 2)
    assert [(c[0]["prompt"], c[0][REFERENCE]) for c in conversations] == list(builtin_items("builtin:arithmetic:5", 2))
    s = Settings.from_options(options(*HOST, "--seed", "2", "--dataset", "builtin:choice:10"))
    workload = Workload(s.workload, "chat", server_family="vllm")
    spec = workload.next_request("m")
    body = orjson.loads(spec.body)
    assert spec.reference is not None and spec.keep_answer and spec.reference.answer in "ABCD"
    assert body["messages"][0]["content"].startswith("Which number equals ") and "_reference" not in body


@pytest.mark.parametrize(
    ("dataset", "message"),
    [
        ("builtin:trivia", "--dataset builtin:trivia: no built-in set 'trivia'; one of builtin:arithmetic"),
        ("builtin:arithmetic:0", "--dataset builtin:arithmetic:0: the item count after 'builtin:arithmetic:' must be"),
        ("builtin:choice:x", "--dataset builtin:choice:x: the item count"),
    ],
)
def test_a_bad_builtin_name_or_size_is_a_one_line_error(dataset, message):
    with pytest.raises(ConfigError) as e:
        Settings.from_options(options(*HOST, "--dataset", dataset))
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False}


def request_body(tmp_path, endpoint: str, family: str, *extra: str) -> tuple[dict, Reference | None]:
    schema_file = tmp_path / "schema.json"
    schema_file.write_text(json.dumps(SCHEMA))
    args = [a.replace("SCHEMA_FILE", str(schema_file)) for a in extra]
    s = Settings.from_options(options(*HOST, "--seed", "1", "--server-family", family, *args))
    spec = Workload(s.workload, endpoint, server_family=family).next_request("m")
    return orjson.loads(spec.body), spec.reference


@pytest.mark.parametrize(
    ("endpoint", "family", "field", "value"),
    [
        ("chat", "vllm", "response_format",
         {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True}}),
        ("chat", "openai", "response_format",
         {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True}}),
        ("chat", "tgi", "response_format", {"type": "json", "value": SCHEMA}),
        ("responses", "vllm", "text",
         {"format": {"type": "json_schema", "name": "answer", "schema": SCHEMA, "strict": True}}),
        ("completions", "vllm", "structured_outputs", {"json": SCHEMA}),
        ("completions", "sglang", "json_schema", json.dumps(SCHEMA, separators=(",", ":"))),
        ("completions", "llamacpp", "json_schema", SCHEMA),
    ],
)  # fmt: skip
def test_json_schema_goes_in_each_apis_own_field_and_in_the_reference(tmp_path, endpoint, family, field, value):
    body, reference = request_body(tmp_path, endpoint, family, "--response-format", "json_schema", "--schema",
                                   "SCHEMA_FILE")  # fmt: skip
    assert body[field] == value
    assert reference == Reference(schema=SCHEMA)


def test_json_object_asks_for_any_object_and_a_rows_own_schema_wins(tmp_path):
    body, reference = request_body(tmp_path, "chat", "vllm", "--response-format", "json_object")
    assert body["response_format"] == {"type": "json_object"} and reference == Reference(schema={"type": "object"})
    body, reference = request_body(tmp_path, "responses", "vllm", "--response-format", "json_object")
    assert body["text"] == {"format": {"type": "json_object"}}
    body, reference = request_body(tmp_path, "completions", "vllm", "--response-format", "json_object")
    assert body["structured_outputs"] == {"json_object": True}
    body, reference = request_body(tmp_path, "chat", "vllm", "--response-format", "json_schema", "--dataset",
                                   "builtin:json:3")  # fmt: skip
    assert reference is not None and body["response_format"]["json_schema"]["schema"] == reference.schema
    assert reference.schema["required"] and "Describe a fictional" in body["messages"][0]["content"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--response-format", "json_schema"), "--response-format json_schema needs --schema FILE, or a --dataset"),
        (("--response-format", "json_schema", "--dataset", "builtin:arithmetic"),
         "--response-format json_schema: a row of --dataset builtin:arithmetic has no 'schema'"),
        (("--schema", "SCHEMA_FILE"), "--schema goes with --response-format json_schema"),
        (("--response-format", "json_schema", "--schema", "MISSING"), "--schema MISSING: No such file"),
        (("--response-format", "json_schema", "--schema", "BAD_FILE"), "--schema BAD_FILE: not a valid JSON schema"),
    ],
)  # fmt: skip
def test_structured_output_options_refuse_with_one_line(tmp_path, args, message):
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    (tmp_path / "bad.json").write_text(json.dumps({"type": 7}))
    names = {
        "SCHEMA_FILE": tmp_path / "schema.json",
        "MISSING": tmp_path / "none.json",
        "BAD_FILE": tmp_path / "bad.json",
    }
    given = [str(names.get(a, a)) for a in args]
    with pytest.raises(ConfigError) as e:
        Settings.from_options(options(*HOST, *given))
    expected = message
    for name, path in names.items():
        expected = expected.replace(name, str(path))
    assert str(e.value).startswith(expected) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("endpoint", "family", "message"),
    [
        ("messages", "anthropic", "--response-format: the Messages API takes no structured output"),
        ("embeddings", "vllm", "--response-format: embeddings takes no structured output"),
        ("completions", "openai", "--response-format: text completions of --server-family openai take no structured"),
        ("completions", "tgi", "--response-format: text completions of --server-family tgi take no structured"),
    ],
)
def test_apis_that_take_no_structured_output_are_refused_before_the_run(endpoint, family, message):
    provider = "anthropic" if endpoint == "messages" else "openai-compatible"
    with pytest.raises(ConfigError) as e:
        check_api(provider, family, endpoint, False, "fast", response_format="json_object")
    assert str(e.value).startswith(message)
    check_api("openai-compatible", family, "chat", False, "fast", response_format="json_schema")  # chat takes it


def test_the_documented_example_files_load_with_their_references():
    docs = Path(__file__).resolve().parents[3] / "docs" / "examples"
    mmlu = [c[0][REFERENCE] for c in load_dataset(str(docs / "mmlu-style.jsonl"), "")]
    assert [r.answer for r in mmlu] == ["B", "B", "C", "B"] and all(len(r.choices) == 4 for r in mmlu)
    gsm8k = [c[0][REFERENCE] for c in load_dataset(str(docs / "gsm8k-style.jsonl"), "")]
    assert [r.expected for r in gsm8k] == ["72", "75", "57", "150"]
    schema = load_schema(str(docs / "person.schema.json"))
    assert schema_valid('{"name": "Ada", "age": 36, "email": "a@b", "languages": ["en"]}', schema)
