"""--model-mix (workload/model_mix.py): parsing, its one-line errors, the weighted pick and each request's model."""

from __future__ import annotations

import math
import random

import orjson
import pytest
from conftest import options

from llm_locust.config.settings import Settings
from llm_locust.errors import ConfigError
from llm_locust.workload.builder import Workload
from llm_locust.workload.model_mix import ModelMix, parse_model_mix


def test_parse_keeps_order_and_weights() -> None:
    mix = parse_model_mix(" base=3, lora-1=1.5 ,org/model:v2=0.5")
    assert mix.names == ("base", "lora-1", "org/model:v2") and mix.weights == (3.0, 1.5, 0.5)
    assert str(mix) == "base=3,lora-1=1.5,org/model:v2=0.5"
    assert mix.share("base") == pytest.approx(0.6)
    assert not parse_model_mix("") and not ModelMix()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a=3,b", "--model-mix 'a=3,b': expected NAME=WEIGHT"),
        ("=2", "--model-mix '=2': expected NAME=WEIGHT"),
        ("a=x", "--model-mix 'a=x': the weight of 'a' is not a number: 'x'"),
        ("a=3,b=0", "--model-mix 'a=3,b=0': the weight of 'b' must be a positive number, got 0"),
        ("a=-1", "--model-mix 'a=-1': the weight of 'a' must be a positive number, got -1"),
        ("a=nan", "--model-mix 'a=nan': the weight of 'a' must be a positive number"),
        ("a=1,a=2", "--model-mix 'a=1,a=2': model 'a' is named twice"),
    ],
)
def test_bad_mix_is_a_one_line_error(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_model_mix(text)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_mix_excludes_model_and_is_a_workload_setting() -> None:
    with pytest.raises(ConfigError) as e:
        Settings.from_options(options("--host", "http://127.0.0.1:1", "--model-mix", "a=1", "--model", "m"))
    assert str(e.value).startswith("--model-mix and --model m exclude each other") and "\n" not in str(e.value)
    settings = Settings.from_options(options("--host", "http://127.0.0.1:1", "--model-mix", "a=3,b=1"))
    assert settings.workload.model_mix == ModelMix(("a", "b"), (3.0, 1.0))
    assert settings.public()["model_mix"] == "a=3,b=1"
    assert not Settings.from_options(options("--host", "http://127.0.0.1:1")).workload.model_mix


def test_pick_follows_the_weights_within_sampling_error() -> None:
    mix = parse_model_mix("a=3,b=1,c=4")
    rng = random.Random(7)
    n = 40_000
    picks = [mix.pick(rng) for _ in range(n)]
    for name in mix.names:
        p = mix.share(name)
        assert abs(picks.count(name) / n - p) < 4 * math.sqrt(p * (1 - p) / n)
    assert [mix.pick(random.Random(3)) for _ in range(5)] == [mix.pick(random.Random(3)) for _ in range(5)]


def test_each_request_names_its_drawn_model_and_counts_in_its_breakdown() -> None:
    settings = Settings.from_options(options("--host", "http://127.0.0.1:1", "--model-mix", "a=1,b=1", "--seed", "4"))
    workload = Workload(settings.workload, "chat", server_family="vllm")
    specs = [workload.next_request("ignored") for _ in range(200)]
    for spec in specs:
        assert orjson.loads(spec.body)["model"] == spec.model and spec.groups == (("model", spec.model),)
    assert {spec.model for spec in specs} == {"a", "b"}
    plain = Settings.from_options(options("--host", "http://127.0.0.1:1", "--seed", "4"))
    spec = Workload(plain.workload, "chat", server_family="vllm").next_request("m")
    assert spec.model == "m" and spec.groups == () and orjson.loads(spec.body)["model"] == "m"


def test_a_conversation_keeps_the_model_drawn_at_its_first_turn() -> None:
    """A multi-turn session talks to one model (an adapter serves a whole conversation); sessions draw anew."""
    settings = Settings.from_options(
        options("--host", "http://127.0.0.1:1", "--model-mix", "a=1,b=1", "--session-turns", "3", "--seed", "4")
    )
    workload = Workload(settings.workload, "chat", server_family="vllm")
    models: dict[str, set[str]] = {}
    for _ in range(60):
        spec = workload.next_request("ignored")
        models.setdefault(spec.session, set()).add(spec.model)
    assert len(models) == 20 and all(len(drawn) == 1 for drawn in models.values())
    assert set().union(*models.values()) == {"a", "b"}
