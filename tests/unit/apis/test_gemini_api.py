"""The `gemini` API (streamGenerateContent) as the workload and the providers build it: its body, its paths with the
model per request, the `gemini` and `vertex` providers' auth and the options they refuse (pure: no runner, no
server)."""

from __future__ import annotations

import json

import pytest
from conftest import options

from llm_locust.apis import gemini
from llm_locust.config.settings import Settings
from llm_locust.errors import ConfigError
from llm_locust.metrics.record import ToolCall
from llm_locust.transport.providers import auth_headers
from llm_locust.workload.builder import Workload
from llm_locust.workload.providers import check_api, completion_path, model_path

PROVIDER = ("--provider", "gemini", "--model", "gemini-2.5-flash")


def settings(*args: str) -> Settings:
    return Settings.from_options(options("--host", "http://127.0.0.1:1", *args))


def body_of(s: Settings) -> dict:
    """The body of one user's first gemini request under the settings `s`."""
    spec = Workload(s.workload, "gemini", server_family=s.endpoint.server_family).next_request("gemini-2.5-flash")
    assert spec.model == "gemini-2.5-flash"
    return json.loads(spec.body)


def test_the_body_is_gemini_s_and_names_no_model(monkeypatch):
    """`contents` of text parts, the length in generationConfig.maxOutputTokens (an --extra-body generationConfig
    merges into it), no model (the path names it), nothing of OpenAI's (stream, max_tokens)."""
    monkeypatch.setenv("GEMINI_API_KEY", "g-key-1234")
    body = body_of(settings(*PROVIDER, "--prompt-tokens", "16", "--max-tokens", "9",
                            "--extra-body", '{"generationConfig": {"temperature": 0}}'))  # fmt: skip
    assert set(body) == {"contents", "generationConfig"}
    assert body["generationConfig"] == {"maxOutputTokens": 9, "temperature": 0}
    [content] = body["contents"]
    assert content["role"] == "user" and isinstance(content["parts"][0]["text"], str)


def test_a_dataset_s_system_and_assistant_messages(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "g-key-1234")
    dataset = tmp_path / "d.jsonl"
    dataset.write_text(json.dumps({"messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "Hello"}]}, {"role": "user", "content": "Why?"},
    ]}) + "\n")  # fmt: skip
    body = body_of(settings(*PROVIDER, "--dataset", str(dataset)))
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["contents"] == [{"role": "user", "parts": [{"text": "Hi"}]},
                                {"role": "model", "parts": [{"text": "Hello"}]},
                                {"role": "user", "parts": [{"text": "Why?"}]}]  # fmt: skip


def test_tools_and_an_agent_step_in_gemini_s_form():
    schema = {"name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {}}}
    assert gemini.API.tools.schemas([schema]) == [{"functionDeclarations": [schema]}]
    calls = [ToolCall("fc-1", "get_weather", '{"city": "Paris"}'), ToolCall("", "now", "")]
    answer, results = gemini.API.tools.step("Let me check.", calls, ["sunny", "noon"])
    assert answer == {"role": "model", "parts": [
        {"text": "Let me check."}, {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}, "id": "fc-1"}},
        {"functionCall": {"name": "now", "args": {}}}]}  # fmt: skip
    assert results == {"role": "user", "parts": [
        {"functionResponse": {"name": "get_weather", "response": {"result": "sunny"}, "id": "fc-1"}},
        {"functionResponse": {"name": "now", "response": {"result": "noon"}}}]}  # fmt: skip
    body = {"messages": [{"role": "user", "content": "Weather?"}, answer, results]}
    gemini.shape(body)  # a history's entries already in Gemini's form stay as they are
    assert body["contents"][1:] == [answer, results]


def test_paths_name_the_model_per_request():
    gemini = completion_path("gemini", "gemini")
    assert gemini == "/v1beta/models/{model}:streamGenerateContent?alt=sse"
    assert model_path(gemini, "gemini-2.5-flash") == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    vertex = completion_path("vertex", "gemini", project="my-proj", location="us-central1")
    assert model_path(vertex, "gemini 2/x") == (
        "/v1/projects/my-proj/locations/us-central1/publishers/google/models/gemini%202%2Fx:streamGenerateContent?alt=sse"
    )
    assert model_path("/v1/chat/completions", "m") == "/v1/chat/completions"


def test_the_gemini_api_key_goes_in_x_goog_api_key_from_google_s_variables(monkeypatch):
    """As Google's SDK: GOOGLE_API_KEY when set, else GEMINI_API_KEY."""
    assert auth_headers("gemini", "g-1") == {"x-goog-api-key": "g-1"}
    monkeypatch.setenv("GEMINI_API_KEY", "from-gemini")
    point = settings(*PROVIDER).endpoint
    assert (point.api_key, point.api_key_env) == ("from-gemini", "GEMINI_API_KEY")
    monkeypatch.setenv("GOOGLE_API_KEY", "from-google")
    point = settings(*PROVIDER).endpoint
    assert (point.api_key, point.api_key_env) == ("from-google", "GOOGLE_API_KEY")


@pytest.mark.parametrize(("args", "env", "needle"), [
    (PROVIDER, {}, "--provider gemini needs an API key: set GOOGLE_API_KEY or GEMINI_API_KEY"),
    (("--provider", "gemini"), {"GEMINI_API_KEY": "g-key-1234"}, "--provider gemini needs --model NAME"),
    (("--provider", "vertex", "--model", "gemini-2.5-flash"), {"GOOGLE_CLOUD_LOCATION": "global"},
     "--provider vertex needs --vertex-project"),
    (("--provider", "vertex", "--model", "m", "--vertex-project", "p"), {}, "needs --vertex-location"),
    ((*PROVIDER, "--ignore-eos"), {"GEMINI_API_KEY": "g-key-1234"}, "--ignore-eos"),
])  # fmt: skip
def test_missing_settings_are_refused_naming_the_fix(args, env, needle, monkeypatch):
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=needle):
        settings(*args)


def test_vertex_takes_its_place_from_google_s_variables(monkeypatch):
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "proj-1")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "europe-west4")
    point = settings("--provider", "vertex", "--model", "gemini-2.5-flash").endpoint
    assert (point.vertex_project, point.vertex_location) == ("proj-1", "europe-west4")


@pytest.mark.parametrize(("args", "needle"), [
    (("gemini", "openai", "chat", False, "fast"), "--provider gemini does not serve chat completions"),
    (("openai-compatible", "vllm", "gemini", False, "fast"), "needs --provider gemini or --provider vertex"),
    (("gemini", "openai", "gemini", True, "fast"), "--ignore-eos"),
    (("gemini", "openai", "gemini", False, "openai-sdk"), "--client openai-sdk"),
])  # fmt: skip
def test_impossible_combinations_are_refused(args, needle):
    with pytest.raises(ConfigError, match=needle):
        check_api(*args)
    check_api("vertex", "openai", "gemini", False, "fast", tools=True)
