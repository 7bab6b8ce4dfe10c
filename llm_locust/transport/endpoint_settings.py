"""The endpoint's settings (`EndpointSettings`): where and how requests go — model, provider and auth, headers, TLS,
client, replicas — each option declared on its field, validated from Locust's parsed options by `from_options`.

Pure (no Locust, no gevent): `config.settings` assembles it with the other stages' settings.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from llm_locust.errors import ConfigError
from llm_locust.option_values import as_list, build, option, shown_as
from llm_locust.transport import sigv4
from llm_locust.transport.ca_file import check_ca_file
from llm_locust.transport.providers import (
    API_KEY_ENV,
    FAMILIES,
    KEY_ENV_FIRST,
    KEY_REQUIRED,
    NO_MODEL_LIST,
    PROVIDERS,
    check_length_control,
    key_variables,
    parse_header,
    server_family,
)
from llm_locust.transport.replicas import BALANCES, allowed_hosts, shown_url, split_hosts
from llm_locust.transport.tokens import AUTH_CHOICES, token_flow

_KEY_VARIABLES = "; ".join(f"{provider} {', else '.join(key_variables(provider))}" for provider in PROVIDERS)
"""Each provider's variables of its API key, for --api-key-env's help."""
DEFAULT_PROVIDER = "openai-compatible"
DEFAULT_AZURE_API_VERSION = "2024-10-21"
CLIENTS = ("fast", "openai-sdk")


@dataclass(frozen=True)
class EndpointSettings:
    """Where and how requests go: the model, the provider (Vertex AI's project and location) and its server family, the
    API key (never in repr, logs or results) or the OAuth flow whose tokens are sent instead (`--auth`), extra headers
    (their names only in results), TLS trust, the client, the balance over replicas, the servers the web UI's form may
    name besides those of --host (`allow_host`; in results without credentials), and the AWS region Bedrock requests
    are signed for (`aws_region`; the AWS credentials are never in settings). The host is Locust's own (`--host`, the
    web UI's field)."""

    model: str = field(metadata=option("Model name sent in each request (default: the first of GET /v1/models)"))
    api_key: str = field(
        repr=False,
        metadata=option(
            "API key (prefer --api-key-env: a flag is visible in the process list); never printed", secret=True
        )
        | shown_as(bool, "api_key_set"),
    )
    api_key_env: str = field(
        metadata=option(
            f"Environment variable holding the API key (default, by --provider: {_KEY_VARIABLES}); never printed",
            startup_only=True,  # which variable of the process's environment is sent
        )
    )
    provider: str = field(
        metadata=option(
            "Request paths and auth of the endpoint",
            DEFAULT_PROVIDER,
            choices=PROVIDERS,
            startup_only=True,  # which variable's key is sent, in which header, by which auth flow
        )
    )
    deployment: str = field(metadata=option("Azure deployment, or Databricks serving-endpoint name"))
    api_version: str = field(metadata=option("Azure OpenAI api-version", DEFAULT_AZURE_API_VERSION))
    vertex_project: str = field(
        metadata=option("Vertex AI: the Google Cloud project in the path (default: $GOOGLE_CLOUD_PROJECT)")
    )
    vertex_location: str = field(
        metadata=option(
            "Vertex AI: the location in the path, e.g. us-central1 or global (default: $GOOGLE_CLOUD_LOCATION)"
        )
    )
    auth: str = field(
        metadata=option(
            "key: the API key as given; oauth: short-lived bearer tokens from the cloud's own library, refreshed "
            "during the run (azure: Entra ID, databricks: OAuth M2M, vertex: Google); auto: the key when one is set, "
            "else oauth where its credentials are in the environment (AZURE_CLIENT_ID, DATABRICKS_CLIENT_ID; always "
            "for vertex)",
            "auto",
            choices=AUTH_CHOICES,
            startup_only=True,  # which credentials of the process are sent
        )
    )
    token_flow: str
    """The short-lived bearer tokens sent instead of a key (`tokens.token_flow`: entra, databricks-m2m, google; ""
    for none)."""
    server_family: str = field(
        metadata=option(
            "Server software: which fields --ignore-eos sends (default: vllm; openai for hosted providers)",
            choices=FAMILIES,
            or_blank=True,
        )
    )
    header: tuple[tuple[str, str], ...] = field(
        repr=False,
        metadata=option(
            "Extra HTTP header 'Name: value' on every request (repeatable; values never printed)",
            None,
            repeat=True,
            secret=True,
        )
        | shown_as(lambda header: [name for name, _ in header]),  # values may be credentials
    )
    ca_bundle: str = field(
        metadata=option(
            "PEM file of CA certificates trusted besides the system's (SSL_CERT_FILE, SSL_CERT_DIR and "
            "REQUESTS_CA_BUNDLE are honoured too)",
            startup_only=True,
        )
    )
    insecure: bool = field(
        metadata=option(
            "Do not verify the server's TLS certificate and host name (the API key goes to whoever answers)",
            False,
            startup_only=True,
        )
    )
    client: str = field(
        metadata=option(
            "fast (default; timestamps every event on arrival) or openai-sdk (the openai package, max_retries=0)",
            "fast",
            choices=CLIENTS,
        )
    )
    balance: str = field(
        metadata=option(
            "How each process spreads requests over the replicas of a comma-separated --host: round-robin (default) "
            "or least-in-flight",
            "round-robin",
            choices=BALANCES,
        )
    )
    allow_host: tuple[str, ...] = field(
        metadata=option(
            "A server the web UI's form may name as host besides those of --host (URL; repeatable, or "
            "comma-separated): a test started from the form sends only to those",
            None,
            repeat=True,
            startup_only=True,
        )
        | shown_as(lambda urls: [shown_url(url) for url in urls])
    )
    aws_region: str = field(  # --provider bedrock signing with SigV4: the region signed for (`sigv4.region`)
        default="",
        metadata=option(
            "--provider bedrock: the AWS region requests are signed for (default: the region of a "
            "bedrock-runtime.REGION.amazonaws.com --host, else AWS_REGION, else the AWS profile's)",
            startup_only=True,  # the scope of the SigV4 signature made with the process's AWS credentials
        ),
    )

    @property
    def signs(self) -> bool:
        """Each request is SigV4-signed (`sigv4.SigV4Signer`): --provider bedrock without a Bedrock API key."""
        return self.provider == "bedrock" and not self.api_key

    @classmethod
    def from_options(cls, options: Any) -> EndpointSettings:
        """Validated from `options`; ConfigError naming the bad option. The openai SDK is imported now with
        `--client openai-sdk` (~1 s), not while the first users start."""
        provider = options.provider
        if provider in ("azure", "databricks") and not options.deployment:
            what = "the Azure deployment" if provider == "azure" else "the Databricks serving-endpoint name"
            raise ConfigError(f"--provider {provider} needs --deployment NAME ({what})")
        if provider in NO_MODEL_LIST and not (options.model or options.model_mix):
            raise ConfigError(
                f"--provider {provider} needs --model NAME (e.g. {NO_MODEL_LIST[provider]}): no model list gives a "
                "default"
            )
        project, location = vertex_place(options) if provider == "vertex" else ("", "")
        family = server_family(options.server_family, provider)
        check_length_control(family, options.ignore_eos)
        headers = tuple(header_lines(options))
        if options.ca_bundle:
            check_ca_file(options.ca_bundle, "--ca-bundle")
        if options.client == "openai-sdk":
            _import_openai()
        api_key_env = options.api_key_env or key_env(provider)
        api_key = options.api_key or api_key_from_env(api_key_env, named=bool(options.api_key_env))
        if provider in KEY_REQUIRED and not api_key:
            raise ConfigError(
                f"--provider {provider} needs an API key: set {' or '.join(key_variables(provider))} "
                "(or name the variable with --api-key-env)"
            )
        flow = token_flow(provider, options.auth, bool(api_key), os.environ)
        if flow and options.client != "fast":
            raise ConfigError(f"--client {options.client} sends no OAuth bearer token ({flow}): use --client fast")
        return build(
            cls,
            options,
            api_key="" if flow else api_key,
            api_key_env=api_key_env,
            vertex_project=project,
            vertex_location=location,
            token_flow=flow,
            server_family=family,
            header=headers,
            allow_host=allowed_hosts(as_list(options.allow_host)),
            aws_region=_bedrock_region(options, api_key, api_key_env) if provider == "bedrock" else options.aws_region,
        )


HEADERS_ENV = "LLM_LOCUST_HEADERS"
"""Environment variable of extra headers, one `Name: value` per line, sent as if given with --header: secret header
values for processes whose command line others can read, and for workers, which never get the master's."""


def header_texts(options: Any) -> list[str]:
    """The extra headers as given, `Name: value` each: every --header of `options`, then every line of
    $LLM_LOCUST_HEADERS (blank lines left out)."""
    return [*as_list(options.header), *(line for line in os.environ.get(HEADERS_ENV, "").splitlines() if line.strip())]


def header_lines(options: Any) -> list[tuple[str, str]]:
    """The extra headers (name, value) of `header_texts`; ConfigError naming --header or $LLM_LOCUST_HEADERS for a
    text that is not `Name: value` (the value is never shown)."""
    given = len(as_list(options.header))
    headers = []
    for index, text in enumerate(header_texts(options)):
        try:
            headers.append(parse_header(text))
        except ConfigError as e:
            if index < given:
                raise
            raise ConfigError(str(e).replace("--header:", f"{HEADERS_ENV}: one per line,", 1)) from None
    return headers


def key_env(provider: str) -> str:
    """The environment variable holding `provider`'s API key when --api-key-env names none: its `KEY_ENV_FIRST` one
    when that is set here, else its `API_KEY_ENV` one."""
    first = KEY_ENV_FIRST.get(provider)
    return first if first and os.environ.get(first) else API_KEY_ENV[provider]


def vertex_place(options: Any) -> tuple[str, str]:
    """(project, location) of Vertex AI's paths: --vertex-project / --vertex-location, else $GOOGLE_CLOUD_PROJECT /
    $GOOGLE_CLOUD_LOCATION; ConfigError naming both when one is missing."""
    place = []
    for name, variable in (("vertex_project", "GOOGLE_CLOUD_PROJECT"), ("vertex_location", "GOOGLE_CLOUD_LOCATION")):
        value = getattr(options, name) or os.environ.get(variable, "")
        if not value:
            flag = "--" + name.replace("_", "-")
            raise ConfigError(f"--provider vertex needs {flag} (or ${variable}): it goes in the request path")
        place.append(value)
    return place[0], place[1]


def api_key_from_env(name: str, named: bool) -> str:
    """The API key held by environment variable `name` in this process ("" when it holds none); ConfigError when the
    variable was named by `--api-key-env` (`named`) but is not set or empty here: the requests would go without a
    key and fail with an HTTP 401 that does not say why."""
    key = os.environ.get(name)
    if named and not key:
        state = "not set" if key is None else "empty"
        raise ConfigError(f"--api-key-env {name}: the variable is {state} in this process's environment")
    return key or ""


def _bedrock_region(options: Any, api_key: str, api_key_env: str) -> str:
    """--provider bedrock checked before any load: a --model (the runtime lists none), the fast client, and either a
    Bedrock API key without whitespace (`api_key`, from `api_key_env`) or well-formed AWS credentials in this process
    and a region to sign for — that region ("" with an API key); ConfigError naming what to set. A master sends no
    request: its credentials are not looked for, its region only shown ("" when it finds none). A worker may learn
    the region with its master's options (its --host, --aws-region): it refuses the test if it has none then
    (`runtime.secret_wire`)."""
    if options.client != "fast":
        raise ConfigError("--provider bedrock needs --client fast (the openai SDK cannot sign requests)")
    if not options.model and not getattr(options, "model_mix", ""):
        raise ConfigError(
            "--provider bedrock needs --model MODEL_ID (e.g. anthropic.claude-3-5-haiku-20241022-v1:0 or an "
            "inference profile id): Bedrock's runtime lists no models"
        )
    if api_key:
        if any(c.isspace() or not c.isprintable() for c in api_key):
            raise ConfigError(f"{api_key_env}: the Bedrock API key holds whitespace (not shown): set it without")
        return ""
    hosts = split_hosts(getattr(options, "host", None))
    sends = not getattr(options, "master", False)
    try:
        signed_for = sigv4.region(hosts[0] if hosts else "", options.aws_region)
    except ConfigError:
        if sends and not getattr(options, "worker", False):
            raise
        signed_for = ""
    if sends:
        sigv4.check_credentials()
    return signed_for


def _import_openai() -> None:
    """Import the openai SDK now; ConfigError if it is missing."""
    try:
        import openai  # noqa: F401
    except ImportError:
        raise ConfigError("--client openai-sdk needs the openai package: pip install openai") from None
