"""What every llm-locust process shares (`Shared`): its Locust environment, whether it leads the run, the test's
settings (their secrets registered with `redact` as they are built) and the trace.

The process's `state.RunState` holds it beside the parts of its role: `lead.Lead` (master, local runner) and
`users_part.UsersPart` (local runner, worker); both read the settings here, which each test's start rebuilds.
"""

from __future__ import annotations

import logging

from locust.env import Environment

from llm_locust import redact
from llm_locust.config.settings import Settings, keep_secrets, secret_options
from llm_locust.errors import ConfigError
from llm_locust.transport.replicas import without_api_root
from llm_locust.transport.tls import check_connection
from llm_locust.workload.traces import Trace, load_trace

logger = logging.getLogger("llm_locust")


class Shared:
    """The part of llm-locust's state every process has: `environment`, `leads` (this process leads the run: a master
    or local runner, which says once what concerns the whole run), `settings` (rebuilt at each test's start: a worker
    learns the options from the master then), `trace` (`--trace` read and selected, else None)."""

    def __init__(self, environment: Environment, leads: bool) -> None:
        self.environment = environment
        self.leads = leads
        self.settings = Settings.from_options(environment.parsed_options)  # registers the secrets
        self._startup_secrets = secret_options(environment.parsed_options)  # command line or config file
        self._said_api_root = False
        self._base_host(environment)
        self._host = environment.host  # of the last test (or given at start-up), credentials included
        proxy = check_connection(environment.host, self.settings.endpoint)
        redact.install_log_filter()
        if proxy is not None and leads:
            logger.info("connecting through the proxy %s", proxy.shown)
        if self.settings.endpoint.insecure and leads:
            logger.warning("--insecure: TLS certificates and host names are not verified (the API key goes to "
                           "whichever server answers)")  # fmt: skip
        self.trace = self._load_trace()

    @property
    def worker_index(self) -> int:
        """This process's index among the workers (0 on a master or local runner)."""
        return getattr(self.environment.runner, "worker_index", 0)

    def rebuild(self, environment: Environment) -> None:
        """A test starts: rebuild the settings from the (now complete) options; a bad option changed in the web UI
        keeps the old settings and says why."""
        options = environment.parsed_options
        if options is not None:  # the web UI form's secret fields left empty, its host as shown
            keep_secrets(options, self._startup_secrets)
            host = self._host
            if host and environment.host == redact.redact(host) != host:
                environment.host = options.host = host
        self._base_host(environment)
        self._host = environment.host
        try:
            old, self.settings = self.settings, Settings.from_options(environment.parsed_options)
            if _trace_of(old) != _trace_of(self.settings):  # a worker learns the options from the master now
                self.trace = self._load_trace()
        except ConfigError as e:  # options changed in the web UI: keep the old ones, say why
            logger.error("%s (keeping the previous settings)", e)

    def _base_host(self, environment: Environment) -> None:
        """A --host ending in /v1 (the OpenAI SDK's base_url) is accepted: the base URL is what precedes it (the API
        paths add /v1), said once (on the master or local runner; a worker gets the master's host)."""
        host = environment.host
        if not host or self.settings.endpoint.provider in ("azure", "databricks"):  # their paths do not start with /v1
            return
        base = without_api_root(host)
        if base != host:
            environment.host = base
            if environment.parsed_options is not None:
                environment.parsed_options.host = base
            if self.leads and not self._said_api_root:
                self._said_api_root = True
                logger.info("--host %s: the base URL is %s (llm-locust's API paths start with /v1)",
                            redact.redact(host), redact.redact(base))  # fmt: skip

    def _load_trace(self) -> Trace | None:
        """`--trace` read and selected (every process reads the same file: workers build the requests of their
        share, the master the due times it assigns); None without a trace."""
        settings = self.settings
        if not settings.load.trace:
            return None
        trace = load_trace(settings.load.trace, settings.load.trace_format, settings.load.trace_window())
        if self.leads:
            logger.info("trace %s: %d requests over %.1f s (speed-up %g)", redact.redact(settings.load.trace),
                        len(trace.requests), trace.due_s[-1], settings.load.trace_speedup)  # fmt: skip
        return trace


def _trace_of(settings: Settings) -> tuple[object, ...]:
    """What decides the trace's requests and times."""
    return settings.load.trace, settings.load.trace_format, settings.load.trace_window()
