"""Declaring an option once, and reading Locust's parsed options into a stage's settings.

An option is declared once, as the metadata of the settings field that holds its value (`option`): its help, its
default, whether it is set only at start-up, whether it is a secret, an environment variable, and the check of its
value alone. `config.options` registers every declared option on Locust's parser from these declarations; `build`
applies their checks; a test holds docs/options.md to them. Rules that involve several options stay in the stage's
`from_options`.

The options come from the command line, a config file, the environment or the web UI's form (which sends text);
each stage's settings value object (`transport.settings`, `workload.settings`, `load.settings`, `metrics.settings`,
`scrape.settings`, `results.settings`, `export.settings`) takes from them what it owns. Pure: no Locust, no gevent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import Field, dataclass, fields
from typing import Any, TypeVar

from llm_locust.errors import ConfigError

T = TypeVar("T")


Check = Callable[[str, Any], None]
"""The check of one option's value alone: (its flag, the value) -> None, or ConfigError naming the flag."""

OPTION = "option"
"""The field-metadata key of a settings field's option declaration (`Option`)."""
_ARGPARSE_TYPES = {"int": int, "float": float, "int | None": int, "float | None": float}
"""The settings field types whose option argparse converts (by the annotation's text); any other is read as text."""


@dataclass(frozen=True)
class Option:
    """One option of `locust`, declared on the settings field that holds its value (`option`)."""

    help: str
    default: Any = ""
    startup_only: bool = False
    """Set only at start-up (command line, config file, environment): left out of the web UI's form, and refused in
    a POST /swarm (`config.web_access`) — an option that names a file, a folder, a URL, a port or an address, or that
    decides which credentials are sent or where."""
    secret: bool = False
    """Masked in the web UI's form (shown empty), never sent to the workers (`config.wire`)."""
    choices: tuple[str, ...] | None = None
    or_blank: bool = False
    """With `choices`: "" (not given) is accepted too."""
    repeat: bool = False
    """Repeatable (argparse "append"); None when not given."""
    env_var: str | None = None
    check: Check | None = None
    """The check of the value alone, applied by `build` (None and "" pass: not given)."""

    def argparse_kwargs(self, annotation: str) -> dict[str, Any]:
        """The keyword arguments of argparse's `add_argument` for this option, on a field annotated `annotation`."""
        kwargs: dict[str, Any] = {"default": self.default, "help": self.help.replace("%", "%%")}
        if annotation == "bool":
            kwargs["action"] = "store_true"
        elif self.repeat:
            kwargs["action"] = "append"
        elif annotation in _ARGPARSE_TYPES:
            kwargs["type"] = _ARGPARSE_TYPES[annotation]
        if self.choices is not None:
            kwargs["choices"] = ("", *self.choices) if self.or_blank else self.choices
            if self.or_blank:
                kwargs["metavar"] = "{" + ",".join(self.choices) + "}"
        if self.env_var:
            kwargs["env_var"] = self.env_var
        return kwargs


def option(help: str, default: Any = "", **more: Any) -> dict[str, Any]:
    """Field metadata declaring the field's option (`Option`): its help and default, and any of `Option`'s other
    attributes."""
    return {OPTION: Option(help, default, **more)}


def declared(cls: type) -> Iterator[tuple[Field[Any], Option]]:
    """The fields of the settings dataclass `cls` that declare an option, each with its `Option`, in order."""
    for f in fields(cls):
        if OPTION in f.metadata:
            yield f, f.metadata[OPTION]


def flag(name: str) -> str:
    """The command-line flag of the option held as `name`: --name-with-hyphens."""
    return "--" + name.replace("_", "-")


def build(cls: type[T], options: Any, **derived: Any) -> T:
    """A `cls` dataclass from the `derived` values and, for its other fields, the option of the same name; each
    declared check (`Option.check`) applied to its field's value first."""
    given = {f.name: getattr(options, f.name) for f in fields(cls) if f.name not in derived}  # type: ignore[arg-type]
    values = {**given, **derived}
    for f, declaration in declared(cls):
        value = values[f.name]
        if declaration.check is not None and value is not None and value != "":
            declaration.check(flag(f.name), value)
    return cls(**values)


def at_least(low: float, hint: str = "") -> Check:
    """A check: the value is >= `low` (`hint` says more, e.g. "0: no limit")."""

    def check(name: str, value: Any) -> None:
        if not value >= low:
            raise ConfigError(f"{name} must be >= {low:g}{_hint(hint)}, got {value}")

    return check


def above(low: float, hint: str = "") -> Check:
    """A check: the value is > `low`."""

    def check(name: str, value: Any) -> None:
        if not value > low:
            raise ConfigError(f"{name} must be > {low:g}{_hint(hint)}, got {value}")

    return check


def between(low: float, high: float, noun: str = "", hint: str = "") -> Check:
    """A check: `low` <= value <= `high` (`noun` names what the value is, e.g. "a fraction")."""

    def check(name: str, value: Any) -> None:
        if not low <= value <= high:
            what = f"{noun} in" if noun else "in"
            raise ConfigError(f"{name} must be {what} [{low:g}, {high:g}]{_hint(hint)}, got {value}")

    return check


def _hint(hint: str) -> str:
    return f" ({hint})" if hint else ""


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


PUBLIC = "public"
"""The field-metadata key that says how a settings field is written to results (summary.json "settings"): absent,
as it is; None, left out; else `(name, convert)`: as `convert(value)`, under `name` ("": the field's own name)."""

HIDDEN: dict[str, Any] = {PUBLIC: None}
"""Field metadata of a setting never written to results."""


def shown_as(convert: Callable[[Any], Any], name: str = "") -> dict[str, Any]:
    """Field metadata: the setting is written to results as `convert(value)`, under `name` when given."""
    return {PUBLIC: (name, convert)}
