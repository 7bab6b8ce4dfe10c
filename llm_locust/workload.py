"""Request bodies: synthetic prompts of a given length and the OpenAI-compatible JSON around them.

The synthetic prompt is `prompt_tokens` words drawn from a varied English word list (no
repeated pad tokens, so no accidental prefix-cache hits), each word ~1 token for common BPE
tokenizers; the built-in simulator counts exactly one token per word.
"""

from __future__ import annotations

import random
from typing import Any

import orjson

from llm_locust.settings import Settings

WORDS = (
    "the of and to in is was for on are with as his they be at one have this from or had by hot "
    "word but what some we can out other were all there when up use your how said an each she "
    "which do their time if will way about many then them write would like so these her long make "
    "thing see him two has look more day could go come did number sound no most people my over "
    "know water than call first who may down side been now find any new work part take get place "
    "made live where after back little only round man year came show every good me give our under "
    "name very through just form sentence great think say help low line differ turn cause much mean "
    "before move right boy old too same tell does set three want air well also play small end put "
    "home read hand port large spell add even land here must big high such follow act why ask men "
    "change went light kind off need house picture try us again animal point mother world near build "
    "self earth father head stand own page should country found answer school grow study still learn "
    "plant cover food sun four between state keep eye never last let thought city tree cross farm "
    "hard start might story saw far sea draw left late run while press close night real life few north"
).split()


class PromptFactory:
    """Makes synthetic prompts; seeded, so a run's workload can be repeated."""

    def __init__(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed)

    def prompt(self, tokens: int) -> str:
        """A prompt of `tokens` words (≈ tokens)."""
        return " ".join(self._rng.choices(WORDS, k=tokens))


def _common(settings: Settings, model: str) -> dict[str, Any]:
    """Fields shared by chat and text completions: model, length control, streaming with usage."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": settings.max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if settings.ignore_eos:
        body["ignore_eos"] = True
    return body


def chat_body(settings: Settings, model: str, prompt: str) -> bytes:
    """A streaming /v1/chat/completions request body (JSON bytes); --extra-body wins on conflicts."""
    body = _common(settings, model)
    body["messages"] = [{"role": "user", "content": prompt}]
    body.update(settings.extra_body)
    return orjson.dumps(body)


def completions_body(settings: Settings, model: str, prompt: str) -> bytes:
    """A streaming /v1/completions request body (JSON bytes); --extra-body wins on conflicts."""
    body = _common(settings, model)
    body["prompt"] = prompt
    body.update(settings.extra_body)
    return orjson.dumps(body)
