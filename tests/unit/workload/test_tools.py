"""Agent tools: the synthetic function schemas (`--tools N`), the tool sets of a file (`--tools-file`, BFCL entries
included), and each API's `tools` field in the request body."""

from __future__ import annotations

import json

import pytest
from conftest import options

from llm_locust.apis import APIS
from llm_locust.config.settings import Settings
from llm_locust.errors import ConfigError
from llm_locust.workload.builder import Workload
from llm_locust.workload.providers import check_api
from llm_locust.workload.tools import load_tool_sets, synthetic_tools

BFCL_SIMPLE = {
    "id": "simple_0",
    "question": [[{"role": "user", "content": "Find the area of a triangle with a base of 10 units and height of 5 "
                   "units."}]],
    "function": [{"name": "calculate_triangle_area",
                  "description": "Calculate the area of a triangle given its base and height.",
                  "parameters": {"type": "dict", "properties": {
                      "base": {"type": "integer", "description": "The base of the triangle."},
                      "height": {"type": "integer", "description": "The height of the triangle."},
                      "unit": {"type": "string", "description": "The unit of measure (defaults to 'units' if not "
                               "specified)"}}, "required": ["base", "height"]}}],
}  # fmt: skip
BFCL_MULTIPLE = {
    "id": "multiple_0",
    "question": [[{"role": "user", "content": "Find the factorial of 5 and the mean of [1, 2.5]."}]],
    "function": [
        {"name": "math.factorial", "description": "Factorial of a number.",
         "parameters": {"type": "dict", "properties": {"number": {"type": "integer", "description": "n"}},
                        "required": ["number"]}},
        {"name": "statistics.mean", "description": "Mean of numbers.",
         "parameters": {"type": "dict", "properties": {"numbers": {"type": "array", "items": {"type": "float"},
                                                                   "description": "the numbers"},
                                                       "pair": {"type": "tuple", "items": {"type": "any"}}},
                        "required": ["numbers"]}},
    ],
}  # fmt: skip


def test_synthetic_tools_are_seeded_distinct_and_valid_schemas():
    tools = synthetic_tools(300, seed=7)
    assert tools == synthetic_tools(300, seed=7) and tools != synthetic_tools(300, seed=8)
    assert synthetic_tools(5, seed=7) == tools[:5]  # a smaller set is the start of a larger one
    assert len({t["name"] for t in tools}) == 300
    for tool in tools:
        params = tool["parameters"]
        assert tool["description"] and params["type"] == "object"
        assert 2 <= len(params["properties"]) <= 5 and 1 <= len(params["required"]) <= 2
        assert set(params["required"]) <= set(params["properties"])
        assert all(
            p["type"] in ("string", "integer", "number", "boolean", "array") for p in params["properties"].values()
        )
        json.dumps(tool)  # plain JSON


def test_tools_file_reads_bfcl_entries_openai_tools_and_single_functions(tmp_path):
    path = tmp_path / "BFCL_v3_simple.json"
    single = {"type": "function", "function": {"name": "get_time", "description": "Now.", "parameters": {
        "type": "object", "properties": {"tz": {"type": "string"}}}}}  # fmt: skip
    lines = [BFCL_SIMPLE, BFCL_MULTIPLE, {"tools": [single]}, single, {"name": "ping", "description": "Ping."}]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    sets = load_tool_sets(str(path))
    assert [len(s) for s in sets] == [1, 2, 1, 2]  # a set per entry; the one-function lines together, last
    area = sets[0][0]
    assert area["name"] == "calculate_triangle_area" and area["parameters"]["type"] == "object"
    assert area["parameters"]["required"] == ["base", "height"]
    factorial, mean = sets[1]
    assert factorial["name"] == "math_factorial" and mean["name"] == "statistics_mean"  # OpenAI's name pattern
    numbers = mean["parameters"]["properties"]["numbers"]
    assert numbers["items"]["type"] == "number"  # BFCL's float
    assert mean["parameters"]["properties"]["pair"] == {"type": "array", "items": {"type": "string"}}
    assert sets[3][1] == {"name": "ping", "description": "Ping.", "parameters": {"type": "object", "properties": {}}}


@pytest.mark.parametrize(("content", "needle"), [
    ("{not json\n", "line 1"),
    ('{"id": "x"}\n', "without a name"),
    ('[1, 2]\n', "not a JSON object"),
    ('{"function": []}\n', "no tool"),
])  # fmt: skip
def test_bad_tools_files_are_one_line_errors_naming_the_file(tmp_path, content, needle):
    path = tmp_path / f"t{abs(hash(content))}.jsonl"
    path.write_text(content)
    with pytest.raises(ConfigError) as error:
        load_tool_sets(str(path))
    message = str(error.value)
    assert needle in message and str(path) in message and "\n" not in message


def settings(*args: str) -> Settings:
    return Settings.from_options(options("--host", "http://127.0.0.1:1", *args))


def test_each_api_carries_the_tools_in_its_own_shape():
    s = settings("--tools", "3", "--seed", "1", "--prompt-tokens", "8")
    tools = synthetic_tools(3, 1)

    def body(endpoint):
        return json.loads(Workload(s.workload, endpoint, server_family="vllm").next_request("m").body)

    assert body("chat")["tools"] == [{"type": "function", "function": t} for t in tools]
    assert body("responses")["tools"] == [{"type": "function", **t} for t in tools]
    assert body("messages")["tools"] == [
        {"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in tools
    ]
    assert "tools" not in json.loads(
        Workload(settings().workload, "chat", server_family="vllm").next_request("m").body
    )  # none without --tools


def test_tools_options_are_checked():
    with pytest.raises(ConfigError, match="exclude each other"):
        settings("--tools", "2", "--tools-file", "x.jsonl")
    with pytest.raises(ConfigError, match="--tools must be >= 0"):
        settings("--tools", "-1")
    with pytest.raises(ConfigError, match="--max-agent-steps"):
        settings("--max-agent-steps", "0")
    with pytest.raises(ConfigError, match="--tool-latency-ms"):
        settings("--tool-latency-ms", "uniform:5")
    with pytest.raises(ConfigError, match="takes no tools") as refused:
        check_api("openai-compatible", "vllm", "completions", False, "fast", tools=True)
    takes_tools = [entry.title for entry in APIS.values() if entry.tools is not None]  # named from the registry
    assert "chat completions" in takes_tools and all(title in str(refused.value) for title in takes_tools)
    s = settings("--tool-latency-ms", "lognormal:300,100", "--tool-result-tokens", "uniform:10,20")
    assert str(s.workload.tool_latency_ms) == "lognormal:300,100" and s.workload.tool_sets == ()
    assert str(settings().workload.tool_latency_ms) == "0"
