"""The APIs llm-locust measures, one module of this package each (chat completions' is `chat`). A module holds all
the client needs of its API — its path per provider, how a prompt becomes its body, its tool and structured-output
forms, its stream decoder (or body reader), how an answer's text, reasoning and tool calls are read, where a scenario
calls it on `self.llm` and its built-in User classes' names — in the `Api` it declares as `API`; this package
registers each module's `API` in `APIS` (`registry`) as it is imported, so a new API is a new module and no list names
it. Another API can also be registered from anywhere, e.g. a locustfile: `register(Api(...))` (ARCHITECTURE.md "How
to add an API"). Imports only `metrics` below it.
"""

from __future__ import annotations

from importlib import import_module
from pkgutil import iter_modules

from llm_locust.apis.registry import (
    APIS,
    COUNTINGS,
    INPUTS,
    OUTPUTS,
    Api,
    BodyReader,
    Counting,
    Rate,
    api,
    endpoints_of,
    openai_paths,
    register,
    run_counting,
    summary_counting,
    summary_rates,
)


def _built_in() -> tuple[Api, ...]:
    """The `API` of each module of this package that declares one, by module name."""
    found = (getattr(import_module(f"{__name__}.{module.name}"), "API", None) for module in iter_modules(__path__))
    return tuple(entry for entry in found if isinstance(entry, Api))


BUILT_IN = _built_in()
"""The APIs llm-locust knows out of the box (each registered below)."""
for built_in in BUILT_IN:
    register(built_in)

__all__ = [
    "APIS",
    "BUILT_IN",
    "COUNTINGS",
    "INPUTS",
    "OUTPUTS",
    "Api",
    "BodyReader",
    "Counting",
    "Rate",
    "api",
    "endpoints_of",
    "openai_paths",
    "register",
    "run_counting",
    "summary_counting",
    "summary_rates",
]
