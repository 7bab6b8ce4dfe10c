"""The run's LLM settings: each stage's validated settings, assembled from the options (`options.add_arguments`).

Each stage owns its settings value object, its options (declared on its fields, `option_values.option`) and its
validation (`from_options`): the endpoint (`transport.endpoint_settings`), timeouts and cancellation
(`transport.settings`), the workload (`workload.settings`), the load (`load.settings`), the objectives
(`metrics.settings`), the scraper (`scrape.settings`), the output (`results.settings`) and the live export
(`export.settings`). `Settings.from_options`
builds them once and the wiring (`runtime/`) hands each stage its own group, never the raw options.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, fields
from typing import Any, get_type_hints

from llm_locust import redact
from llm_locust.config.options import SECRET_OPTIONS
from llm_locust.export.settings import ExportSettings
from llm_locust.load.settings import LoadSettings
from llm_locust.metrics.settings import ObjectiveSettings
from llm_locust.option_values import PUBLIC, as_list
from llm_locust.results.settings import OutputSettings
from llm_locust.scrape.settings import ScrapeSettings
from llm_locust.transport.endpoint_settings import EndpointSettings, header_texts
from llm_locust.transport.providers import API_KEY_ENV, KEY_ENV_FIRST, PROVIDERS
from llm_locust.transport.proxy import proxy_urls
from llm_locust.transport.replicas import split_hosts
from llm_locust.transport.settings import CancelSettings, TimeoutSettings
from llm_locust.transport.sigv4 import AWS_SECRET_ENV
from llm_locust.transport.tokens import credential_secrets
from llm_locust.workload.settings import WorkloadSettings


@dataclass(frozen=True)
class Settings:
    """Validated LLM settings of a run, one group per stage (in the order they are validated)."""

    timeouts: TimeoutSettings
    output: OutputSettings
    load: LoadSettings
    objectives: ObjectiveSettings
    cancel: CancelSettings
    scrape: ScrapeSettings
    endpoint: EndpointSettings
    workload: WorkloadSettings
    export: ExportSettings

    @classmethod
    def from_options(cls, options: Any) -> Settings:
        """Build from Locust's parsed options (their secrets registered with `redact` first);
        raise ConfigError naming the bad option."""
        register_secrets(options)
        return cls(**{name: group.from_options(options) for name, group in get_type_hints(cls).items()})

    @property
    def prompt_buckets(self) -> bool:
        """True when prompt lengths vary within the run (a length sweep, a distribution, a dataset): each request
        then also counts in its prompt-length bucket (`metrics.length_buckets`)."""
        workload = self.workload
        return bool(self.load.sweep_prompt_tokens or workload.dataset or workload.prompt_tokens.kind != "fixed")

    def public(self) -> dict[str, Any]:
        """The settings as written to results (summary.json "settings"): every group's fields in one flat mapping,
        each as its field's metadata says (`option_values.PUBLIC`): the API key only as present or not, header
        names only, the results folder left out."""
        shown: dict[str, Any] = {}
        for group in (getattr(self, f.name) for f in fields(self)):
            for f in fields(group):
                how = f.metadata.get(PUBLIC, ("", copy.deepcopy))
                if how is not None:
                    name, convert = how
                    shown[name or f.name] = convert(getattr(group, f.name))
        return shown


def register_secrets(options: Any) -> None:
    """Register with `redact` every secret `options` hold: the API key (--api-key, or the variable named by
    --api-key-env or the provider's default), the AWS secret key and session token of the environment, each --header
    value (and each of $LLM_LOCUST_HEADERS), and the credentials in --host, every --metrics-url and the proxy variables
    (HTTPS_PROXY ...), the OAuth flows' client secrets and service-account private key (`tokens.credential_secrets`).
    The one place the registry is filled (besides each bearer token, registered as it is fetched:
    `runtime.token_keeper`, and an AWS profile's secrets, as `transport.sigv4` reads them); called by
    `Settings.from_options` in every process (a worker gets the master's options without its secrets, `config.wire`,
    and registers its own)."""
    provider = options.provider if options.provider in API_KEY_ENV else PROVIDERS[0]
    redact.register(options.api_key)
    redact.register(os.environ.get(options.api_key_env or API_KEY_ENV[provider]))
    redact.register(os.environ.get(KEY_ENV_FIRST.get(provider, "")))
    for name in AWS_SECRET_ENV:  # --provider bedrock signs with them (`transport.sigv4` adds a profile's too)
        redact.register(os.environ.get(name))
    for text in header_texts(options):
        redact.register(text.partition(":")[2].strip())
    for secret in credential_secrets(os.environ):  # the OAuth flows' (each token: `runtime.token_keeper`)
        redact.register(secret)
    hosts = split_hosts(getattr(options, "host", None))
    for url in (*hosts, *as_list(getattr(options, "metrics_url", None)), *proxy_urls()):
        redact.register_url(url)


def secret_options(options: Any) -> dict[str, Any]:
    """The values of the `SECRET_OPTIONS` in `options` (to restore them with `keep_secrets`)."""
    return {name: getattr(options, name, None) for name in SECRET_OPTIONS}


def keep_secrets(options: Any, given: dict[str, Any]) -> None:
    """Put back the `given` secret options (`secret_options`) that `options` now hold empty.

    The web UI's form shows a secret field empty and sends it back so (a list option as `['']`):
    a test started with the field left empty keeps the value given at start-up.
    """
    for name, value in given.items():
        if value and not as_list(getattr(options, name, None)):
            setattr(options, name, value)
