"""One request body for every request: a built-in user (its dataset line) and a scenario's call (the same fields as
keyword arguments) under the same --extra-body send the same body, --extra-body merged deep into both, as a server on
127.0.0.1 received them."""

from __future__ import annotations

import json

from conftest import ChatUser, options, run_local
from harness.recording_server import RecordingServer
from locust import constant, task

from llm_locust.runtime.users import LLMUser

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."}]
OWN = {"messages": MESSAGES, "max_tokens": 7, "temperature": 0.5, "metadata": {"run": {"team": "a"}, "tag": "own"}}
"""The request's own fields: a dataset line of the built-in user, the keyword arguments of the scenario's call."""
EXTRA_BODY = {
    "temperature": 0,
    "metadata": {"run": {"id": "r1"}},
    "stream_options": {"continuous_usage_stats": True, "include_usage": False},
}


class ScenarioUser(LLMUser):
    """A scenario sending the dataset line's fields as its call's keyword arguments."""

    wait_time = constant(0.05)

    @task
    def ask(self) -> None:
        self.llm.chat.completions.create(**OWN)


def bodies(tmp_path, name: str, user_class: type, *extra: str) -> list[dict]:
    """The bodies a server on 127.0.0.1 received from one `user_class` user with --extra-body (`extra`: more
    options)."""
    with RecordingServer() as server:
        opts = options("--host", server.url, "--model", "m", "--extra-body", json.dumps(EXTRA_BODY), *extra,
                       "--results-dir", str(tmp_path / name))  # fmt: skip
        run_local(opts, users=1, seconds=0.6, user_classes=[user_class])
    return [request["body"] for request in server.requests if request["method"] == "POST"]


def test_a_scenario_call_and_a_built_in_user_send_the_same_body_with_extra_body_merged_deep(tmp_path):
    dataset = tmp_path / "line.jsonl"
    dataset.write_text(json.dumps(OWN) + "\n")
    built_in = bodies(tmp_path, "built-in", ChatUser, "--dataset", str(dataset))
    scenario = bodies(tmp_path, "scenario", ScenarioUser)
    assert built_in and scenario
    assert all(body == built_in[0] for body in built_in + scenario), (built_in[0], scenario[0])
    assert built_in[0] == {
        "model": "m",
        "messages": MESSAGES,
        "max_tokens": 7,
        "temperature": 0,  # --extra-body wins over the request's own
        "metadata": {"run": {"team": "a", "id": "r1"}, "tag": "own"},  # merged at any depth
        "stream": True,
        "stream_options": {"continuous_usage_stats": True, "include_usage": True},  # the measurements' own stay
    }
