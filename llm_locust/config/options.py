"""llm-locust's command-line options, registered on Locust's parser (`add_arguments`), grouped by stage.

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

from llm_locust.config.web_access import WEB_UI_HOST
from llm_locust.export.settings import ExportSettings
from llm_locust.load.settings import LoadSettings
from llm_locust.metrics.settings import ObjectiveSettings
from llm_locust.option_values import declared, flag
from llm_locust.results.settings import OutputSettings
from llm_locust.scrape.settings import ScrapeSettings
from llm_locust.transport.replicas import BALANCES
from llm_locust.transport.settings import CancelSettings, TimeoutSettings
from llm_locust.transport.tokens import AUTH_CHOICES
from llm_locust.workload.providers import (
    FAMILIES,
    PROVIDERS,
)
from llm_locust.workload.settings import WorkloadSettings

DEFAULT_AZURE_API_VERSION = "2024-10-21"
DECLARED_GROUPS: tuple[tuple[str, str, type], ...] = (
    ("llm-locust objectives", "SLOs, pass/fail gates and drift windows", ObjectiveSettings),
    ("llm-locust workload", "What each request carries: prompts, lengths, files, sessions, tools", WorkloadSettings),
    ("llm-locust load", "Open-loop request rate, sweeps, capacity search, trace replay and limits", LoadSettings),
    ("llm-locust timeouts", "The bounds on one request", TimeoutSettings),
    ("llm-locust cancellation", "Streams the client closes early", CancelSettings),
    ("llm-locust results", "The results folder, the time series, per-request lines and the cost", OutputSettings),
    ("llm-locust server metrics", "Scrape the server's Prometheus metrics", ScrapeSettings),
    ("llm-locust live export", "Serve the run's client metrics to Prometheus", ExportSettings),
)
"""The stages whose options are declared on their settings' fields (`option_values.option`), each registered as
one group of Locust's --help: (title, description, settings class)."""
CLIENTS = ("fast", "openai-sdk")
DEFAULT_PROVIDER = "openai-compatible"
SECRET_OPTIONS = ("api_key", "header")
"""Options whose values are secrets: masked in the web UI's form, which shows them empty."""


def add_arguments(parser: Any) -> None:
    """Register llm-locust's options on Locust's argument parser (shown in its web UI form too, but the
    `startup_only` ones), and make loopback (`WEB_UI_HOST`) the web UI's default address."""
    if parser.get_default("web_host") == "":  # Locust's parser (every interface); an explicit value still wins
        parser.set_defaults(web_host=WEB_UI_HOST)
    group = _WebUIGroup(parser.add_argument_group("llm-locust", "LLM endpoint, workload and results options"))
    group.add_argument(
        "--model", default="", help="Model name sent in each request (default: the first of GET /v1/models)"
    )
    group.add_argument(
        "--api-key-env",
        default="",
        startup_only=True,  # which variable of the process's environment is sent
        help="Environment variable holding the API key (default: OPENAI_API_KEY; AZURE_OPENAI_API_KEY with "
        "--provider azure; DATABRICKS_TOKEN with --provider databricks; ANTHROPIC_API_KEY with --provider anthropic; "
        "GOOGLE_API_KEY, else GEMINI_API_KEY with --provider gemini); "
        "never printed",
    )
    group.add_argument(
        "--api-key",
        default="",
        is_secret="api_key" in SECRET_OPTIONS,
        help="API key (prefer --api-key-env: a flag is visible in the process list); never printed",
    )
    add_provider_arguments(group)
    add_replica_and_cancel_arguments(parser)
    for title, description, settings in DECLARED_GROUPS:
        add_declared(parser, title, description, settings)


def add_provider_arguments(group: Any) -> None:
    """Options that say how to talk to the endpoint: provider, paths, auth, server family, client."""
    group.add_argument(
        "--provider",
        default=DEFAULT_PROVIDER,
        choices=PROVIDERS,
        startup_only=True,  # which variable's key is sent, in which header, by which auth flow
        help="Request paths and auth of the endpoint",
    )
    group.add_argument("--deployment", default="", help="Azure deployment, or Databricks serving-endpoint name")
    group.add_argument("--api-version", default=DEFAULT_AZURE_API_VERSION, help="Azure OpenAI api-version")
    group.add_argument(
        "--vertex-project",
        default="",
        help="Vertex AI: the Google Cloud project in the path (default: $GOOGLE_CLOUD_PROJECT)",
    )
    group.add_argument(
        "--vertex-location",
        default="",
        help="Vertex AI: the location in the path, e.g. us-central1 or global (default: $GOOGLE_CLOUD_LOCATION)",
    )
    group.add_argument(
        "--auth",
        default="auto",
        choices=AUTH_CHOICES,
        startup_only=True,  # which credentials of the process are sent
        help="key: the API key as given; oauth: short-lived bearer tokens from the cloud's own library, refreshed "
        "during the run (azure: Entra ID, databricks: OAuth M2M, vertex: Google); auto: the key when one is set, else "
        "oauth where its credentials are in the environment (AZURE_CLIENT_ID, DATABRICKS_CLIENT_ID; always for vertex)",
    )
    group.add_argument(
        "--aws-region",
        default="",
        startup_only=True,  # the scope of the SigV4 signature made with the process's AWS credentials
        help="--provider bedrock: the AWS region requests are signed for (default: the region of a "
        "bedrock-runtime.REGION.amazonaws.com --host, else AWS_REGION, else the AWS profile's)",
    )
    group.add_argument(
        "--server-family",
        default="",
        choices=("", *FAMILIES),
        metavar="{" + ",".join(FAMILIES) + "}",
        help="Server software: which fields --ignore-eos sends (default: vllm; openai for hosted providers)",
    )
    group.add_argument(
        "--header",
        action="append",
        default=None,
        is_secret="header" in SECRET_OPTIONS,
        help="Extra HTTP header 'Name: value' on every request (repeatable; values never printed)",
    )
    group.add_argument(
        "--ca-bundle",
        default="",
        startup_only=True,
        help="PEM file of CA certificates trusted besides the system's (SSL_CERT_FILE, SSL_CERT_DIR and "
        "REQUESTS_CA_BUNDLE are honoured too)",
    )
    group.add_argument(
        "--insecure",
        action="store_true",
        default=False,
        startup_only=True,
        help="Do not verify the server's TLS certificate and host name (the API key goes to whoever answers)",
    )
    group.add_argument(
        "--allow-host",
        action="append",
        default=None,
        startup_only=True,
        help="A server the web UI's form may name as host besides those of --host (URL; repeatable, or "
        "comma-separated): a test started from the form sends only to those",
    )
    group.add_argument(
        "--web-origin",
        action="append",
        default=None,
        startup_only=True,
        help="An origin the web UI is opened at besides its own address, e.g. a reverse proxy's "
        "https://locust.example.com (repeatable): its pages may start and stop tests; other origins' pages may not",
    )
    group.add_argument(
        "--client",
        default="fast",
        choices=CLIENTS,
        help="fast (default; timestamps every event on arrival) or openai-sdk (the openai package, max_retries=0)",
    )


def add_replica_and_cancel_arguments(parser: Any) -> None:
    """Several replicas behind --host (`llm_locust.transport.replicas`)."""
    group = _WebUIGroup(
        parser.add_argument_group(
            "llm-locust replicas", "--host URL1,URL2,... spreads the requests over several replicas"
        )
    )
    group.add_argument(
        "--balance",
        default="round-robin",
        choices=BALANCES,
        help="How each process spreads requests over the replicas of a comma-separated --host: round-robin "
        "(default) or least-in-flight",
    )


def add_declared(parser: Any, title: str, description: str, settings: type) -> None:
    """Register on `parser`, in a group `title`, every option declared on the fields of the stage's `settings`
    dataclass (`option_values.option`), as its declaration says."""
    group = _WebUIGroup(parser.add_argument_group(title, description))
    for f, declaration in declared(settings):
        group.add_argument(
            flag(f.name),
            is_secret=declaration.secret,
            startup_only=declaration.startup_only,
            **declaration.argparse_kwargs(str(f.type)),
        )


class _WebUIGroup:
    """An argument group whose options Locust's web UI shows (`is_secret` ones masked), except the `startup_only`
    ones (see the module docstring).

    Locust only marks options added with its parser's own `add_argument`; groups are plain
    argparse, so the same attributes are set here.
    """

    def __init__(self, group: Any) -> None:
        self._group = group

    def add_argument(self, *args: Any, is_secret: bool = False, startup_only: bool = False, **kwargs: Any) -> Any:
        action = self._group.add_argument(*args, **kwargs)
        action.include_in_web_ui = not startup_only
        action.is_secret = is_secret
        action.startup_only = startup_only
        return action
