"""Every request's body (`workload.body`): --extra-body merged deep, the API's fixed fields last, the model in the
API's field or nowhere."""

from __future__ import annotations

from llm_locust.apis import api
from llm_locust.workload.body import merge_deep, request_body


def test_extra_body_merges_deep_without_changing_the_request_s_own_objects():
    own = {"a": {"b": {"c": 1, "d": 2}}, "e": 1}
    body = dict(own)
    merge_deep(body, {"a": {"b": {"c": 3}, "f": [1]}, "e": {"g": 1}})
    assert body == {"a": {"b": {"c": 3, "d": 2}, "f": [1]}, "e": {"g": 1}}
    assert own == {"a": {"b": {"c": 1, "d": 2}}, "e": 1}  # a dataset line's objects are shared by its requests


def test_request_body_model_extra_body_then_the_fixed_fields():
    extra = {"stream": False, "stream_options": {"continuous_usage_stats": True}, "generationConfig": {"topK": 2}}
    chat = request_body(api("chat"), {"model": "other", "messages": []}, "m", extra)
    assert chat["model"] == "m" and chat["stream"] is True  # the measurements need the stream
    assert chat["stream_options"] == {"continuous_usage_stats": True, "include_usage": True}
    gemini = request_body(api("gemini"), {"contents": [], "generationConfig": {"maxOutputTokens": 9}}, "m", extra)
    assert "model" not in gemini and gemini["generationConfig"] == {"maxOutputTokens": 9, "topK": 2}
    embeddings = request_body(api("embeddings"), {"input": ["a"]}, "m", {"dimensions": 8})
    assert embeddings == {"input": ["a"], "model": "m", "dimensions": 8}
