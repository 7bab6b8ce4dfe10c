"""llm-locust's command-line options, registered on Locust's parser (`add_arguments`), grouped by stage.

Each option is declared once, on the field of its stage's settings that holds its value (`option_values.option`:
flag, default, help, start-up only, secret, environment variable, check); `add_arguments` registers them from those
declarations, one --help group per stage (`DECLARED_GROUPS`), and tests/unit/config/test_options.py holds
docs/options.md to them.

Registered on Locust's parser, they work on the command line, in config files, in the web UI, and reach workers
from the master. `settings.Settings.from_options` has each stage's settings group validate its own, once; nothing
else reads the raw options.

An option declared `startup_only=True` — one that names a file, a folder, a URL, a port or an address, or that
decides which credentials are sent or where the key may go — is set when llm-locust starts (command line, config
file, environment) and never from the web UI: it is left out of the start form, and a POST /swarm that carries it is
refused (`web_access.form_refusal`, applied by `runtime.web_guard`). Every field Locust's /swarm would copy into the
options and that the form does not show is refused the same way, Locust's own (`--csv`, `--html`, ...) included.
"""

from __future__ import annotations

from typing import Any

from llm_locust.config.web_access import WEB_UI_HOST, WebUIOptions
from llm_locust.export.settings import ExportSettings
from llm_locust.load.settings import LoadSettings
from llm_locust.metrics.settings import ObjectiveSettings
from llm_locust.option_values import declared, flag
from llm_locust.results.settings import OutputSettings
from llm_locust.scrape.settings import ScrapeSettings
from llm_locust.transport.endpoint_settings import EndpointSettings
from llm_locust.transport.settings import CancelSettings, TimeoutSettings
from llm_locust.workload.settings import WorkloadSettings

DECLARED_GROUPS: tuple[tuple[str, str, type], ...] = (
    ("llm-locust", "LLM endpoint: model, provider and auth, headers, TLS, client, replicas", EndpointSettings),
    ("llm-locust timeouts", "The bounds on one request", TimeoutSettings),
    ("llm-locust workload", "What each request carries: prompts, lengths, files, sessions, tools", WorkloadSettings),
    ("llm-locust load", "Open-loop request rate, sweeps, capacity search, trace replay and limits", LoadSettings),
    ("llm-locust objectives", "SLOs, pass/fail gates and drift windows", ObjectiveSettings),
    ("llm-locust cancellation", "Streams the client closes early", CancelSettings),
    ("llm-locust results", "The results folder, the time series, per-request lines and the cost", OutputSettings),
    ("llm-locust server metrics", "Scrape the server's Prometheus metrics", ScrapeSettings),
    ("llm-locust live export", "Serve the run's client metrics to Prometheus", ExportSettings),
    ("llm-locust web UI", "Who may use the web UI", WebUIOptions),
)
"""Every option's declaring settings class, each registered as one group of Locust's --help: (title, description,
settings class)."""
SECRET_OPTIONS = tuple(f.name for _, _, group in DECLARED_GROUPS for f, d in declared(group) if d.secret)
"""Options whose values are secrets (declared `secret`): masked in the web UI's form, which shows them empty."""


def add_arguments(parser: Any) -> None:
    """Register llm-locust's options on Locust's argument parser (shown in its web UI form too, but the
    `startup_only` ones), and make loopback (`WEB_UI_HOST`) the web UI's default address."""
    if parser.get_default("web_host") == "":  # Locust's parser (every interface); an explicit value still wins
        parser.set_defaults(web_host=WEB_UI_HOST)
    for title, description, settings in DECLARED_GROUPS:
        add_declared(parser, title, description, settings)


def add_declared(parser: Any, title: str, description: str, settings: type) -> None:
    """Register on `parser`, in a group `title`, every option declared on the fields of the stage's `settings`
    dataclass (`option_values.option`), as its declaration says: Locust's web UI shows it unless it is start-up only
    (`is_secret` ones masked). Locust marks only the options added with its parser's own `add_argument`; a group is
    plain argparse, so the same attributes are set here."""
    group = parser.add_argument_group(title, description)
    for f, declaration in declared(settings):
        action = group.add_argument(flag(f.name), **declaration.argparse_kwargs(str(f.type)))
        action.include_in_web_ui = not declaration.startup_only
        action.is_secret = declaration.secret
        action.startup_only = declaration.startup_only
