"""Reading Locust's parsed options into a stage's settings: the shared helpers of every `from_options`.

The options come from the command line, a config file, the environment or the web UI's form (which sends text);
each stage's settings value object (`transport.settings`, `workload.settings`, `load.settings`, `metrics.settings`,
`scrape.settings`, `results.settings`) takes from them what it owns. Pure: no Locust, no gevent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any, TypeVar

from llm_locust.errors import ConfigError

T = TypeVar("T")


def build(cls: type[T], options: Any, **derived: Any) -> T:
    """A `cls` dataclass from the `derived` values and, for its other fields, the option of the same name."""
    given = {f.name: getattr(options, f.name) for f in fields(cls) if f.name not in derived}  # type: ignore[arg-type]
    return cls(**given, **derived)


def as_list(value: Any) -> list[str]:
    """A repeatable option's values, blank ones left out (the web UI form sends one string, one
    value per line, or a list with an empty string for a field left empty)."""
    if isinstance(value, str):
        return [line for line in value.splitlines() if line.strip()]
    return [item for item in value or [] if not isinstance(item, str) or item.strip()]


def optional_int(value: Any, option: str) -> int | None:
    """An optional integer option (the web UI form sends text; '' means not given)."""
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{option} must be a whole number, got {value!r}") from None


def optional_float(options: Any, name: str) -> float | None:
    """An option without default: None when unset (the web UI sends "" or the text typed), else a float."""
    value = getattr(options, name)
    if value is None or value == "":
        return None
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"--{name.replace('_', '-')} must be a number, got {value!r}") from None


def positive(options: Any, *names: str) -> None:
    """Raise ConfigError naming the first of the `names` options that is not > 0."""
    for name in names:
        if not getattr(options, name) > 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be > 0, got {getattr(options, name)}")


PUBLIC = "public"
"""The field-metadata key that says how a settings field is written to results (summary.json "settings"): absent,
as it is; None, left out; else `(name, convert)`: as `convert(value)`, under `name` ("": the field's own name)."""

HIDDEN: dict[str, Any] = {PUBLIC: None}
"""Field metadata of a setting never written to results."""


def shown_as(convert: Callable[[Any], Any], name: str = "") -> dict[str, Any]:
    """Field metadata: the setting is written to results as `convert(value)`, under `name` when given."""
    return {PUBLIC: (name, convert)}
