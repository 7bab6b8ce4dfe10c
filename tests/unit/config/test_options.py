"""An option is declared once, on the settings field that holds it: Locust's parser, its web UI form and
docs/options.md follow the declarations (`option_values.option`, `config.options.add_declared`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from conftest import ROOT, options
from locust.argument_parser import get_empty_argument_parser

from llm_locust.config.options import DECLARED_GROUPS, add_arguments, add_declared
from llm_locust.errors import ConfigError
from llm_locust.option_values import Option, above, build, declared, flag, option

DOCS = (ROOT / "docs/options.md").read_text().split("\n## ")[1]
"""docs/options.md's section "Options of `locust`"."""


def declarations() -> dict[str, tuple[str, Option]]:
    """Every declared option: its destination -> (the settings field's annotation, its declaration)."""
    found: dict[str, tuple[str, Option]] = {}
    for _, _, settings in DECLARED_GROUPS:
        for f, declaration in declared(settings):
            assert f.name not in found, f"{f.name} declared twice"
            found[f.name] = (str(f.type), declaration)
    return found


def registered() -> dict[str, Any]:
    """The actions of Locust's parser with llm-locust's options on it, by destination."""
    parser = get_empty_argument_parser()
    add_arguments(parser)
    return {action.dest: action for action in parser._actions}


def doc_row(option_flag: str) -> list[str]:
    """The cells of docs/options.md's one table row whose first cell names `option_flag`."""
    rows = [row for row in re.findall(r"^\| .*\|$", DOCS, flags=re.M) if re.match(rf"\| `{option_flag}[ `]", row)]
    assert len(rows) == 1, f"{option_flag}: {len(rows)} rows in docs/options.md"
    return [cell.strip() for cell in rows[0].strip("|").split(" | ")]


def test_each_declared_option_is_registered_as_declared_and_reaches_the_web_ui_unless_start_up_only():
    actions = registered()
    found = declarations()
    ours = {dest for dest, action in actions.items() if hasattr(action, "startup_only")}
    assert ours == set(found), f"registered without a declaration: {ours - set(found)}"
    assert len(found) >= 90
    for name, (_, declaration) in found.items():
        action = actions[name]
        assert action.option_strings == [flag(name)]
        assert action.default == declaration.default, name
        assert action.include_in_web_ui is not declaration.startup_only, name
        assert action.is_secret is declaration.secret, name
        assert action.startup_only is declaration.startup_only, name


def test_options_keep_their_types_environment_variables_and_config_file_names(tmp_path, monkeypatch):
    """A declared float option parses to a float from the command line, from `LOCUST_*` where declared, and from a
    config file under its flag's name."""
    assert options("--drift-window-s", "12").drift_window_s == 12.0
    assert options("--prometheus-port", "9646").prometheus_port == 9646
    assert options().max_error_rate == 0.01 and options().slo is None
    monkeypatch.setenv("LOCUST_MAX_CLIENT_ERROR_MS", "2.5")
    assert options().max_client_error_ms == 2.5
    conf = tmp_path / "locust.conf"
    conf.write_text("drift-warmup-s = 7\nslo = ttft_p90_ms=100\n")
    parsed = options("--config", str(conf))
    assert parsed.drift_warmup_s == 7.0 and parsed.slo == ["ttft_p90_ms=100"]


def test_each_declared_option_has_one_docs_row_with_the_declared_default_and_environment_variable():
    for name, (annotation, declaration) in declarations().items():
        row = doc_row(flag(name))
        default = row[1]
        if declaration.env_var:
            assert f"`{declaration.env_var}`" in row[2], name
        value = declaration.default
        if annotation == "bool":
            assert value is False and default == "off", name
        elif isinstance(value, int | float):
            shown = str(int(value)) if value == int(value) else str(value)
            assert re.search(rf"(^|[^\d.]){re.escape(shown)}(\D|$)", default), (name, default)
        elif value:
            assert str(value) in default, (name, default)


def test_docs_start_up_only_list_is_exactly_the_options_registered_start_up_only():
    paragraph = DOCS[DOCS.index("**Start-up only**") :].split("\n\n", 1)[0]
    listed = set(re.findall(r"`(--[a-z0-9-]+)`", paragraph))
    startup_only = {flag(a.dest) for a in registered().values() if getattr(a, "startup_only", False)}
    assert listed == startup_only, f"docs only: {listed - startup_only}; code only: {startup_only - listed}"


def test_a_declaration_is_an_option_with_its_check():
    """A stage's settings with one declared option: registered with its default and help, checked by `build`."""

    @dataclass(frozen=True)
    class Knob:
        knob_ms: float = field(metadata=option("How long the knob turns, ms (100 %)", 5.0, check=above(0)))

    parser = get_empty_argument_parser()
    add_declared(parser, "knobs", "a stage's knobs", Knob)
    assert parser.parse_args(["--knob-ms", "2"]).knob_ms == 2.0
    assert parser.parse_args([]).knob_ms == 5.0
    assert "100 %" in parser.format_help()
    assert build(Knob, parser.parse_args([])).knob_ms == 5.0
    with pytest.raises(ConfigError, match=r"^--knob-ms must be > 0, got -1.0$"):
        build(Knob, parser.parse_args(["--knob-ms", "-1"]))
