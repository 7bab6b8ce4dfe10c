"""Wires llm-locust into Locust's events: options, per-request metrics, worker→master, results.

A locustfile calls `install(events)` once. Then, in every Locust process:

- `init_command_line_parser`: our options (`config.options.add_arguments`); the results folder checked as soon as
  Locust has parsed the command line (`results_folder.check_command_line`: before any file is opened or user started).
- `init`: a `RunState` for the environment (the parts of the process's role: `state`); options validated (a bad
  one: one-line error, exit code 2).
- `test_start`: settings rebuilt (workers receive the master's options only now), metrics reset.
- `request` (processes running users): the HTTP request event carries the finished
  `RequestRecord` in its context; it goes into the `MetricsRecorder`. No extra request events
  are fired: Locust's request rate and failure ratio count real requests only (TTFT, TPOT, ITL
  are in the web UI's LLM view, `webui`, and the results folder).
- `report_to_master` (worker) / `worker_report` (master): histogram deltas and the number of
  requests in flight ride along with Locust's own stats reports; the master merges the deltas
  into `RunMetrics`.
- With a web UI (master / local): the LLM view is attached to it (`webui.attach`); its start form reaches no file,
  URL or port and no host outside --host / --allow-host (`web_guard.install`).
- A ticker greenlet (master / local) merges the local delta, samples users and workers, and
  writes each closed window of the time series.
- `test_stop` + a grace period, and `quitting` (after the workers' last reports): summary.json
  written, summary table printed. While the test runs, summary.json is rewritten every
  `SNAPSHOT_S` marked "incomplete"; quitting before the test stopped (SIGTERM, Ctrl-C) or a
  worker quitting mid-test (it says so with `INTERRUPTED_MESSAGE` after a last report) leaves it
  "incomplete" too. A run in which nothing succeeded ends with a one-line diagnosis and a
  non-zero exit code. A master or local run stopped by SIGTERM / SIGINT says so (`run.interrupted`
  names the signal; verdict failed, exit code `EXIT_INTERRUPTED`); workers that quit with it are
  not "lost".
- Secrets: registered with `redact` where the settings are built (`settings.register_secrets`);
  failure messages are redacted when a request record fails, exception texts when the runner
  collects them, log records by a filter.
"""

from __future__ import annotations

import logging
import sys
import weakref
from typing import Any

import gevent
from locust.env import Environment

from llm_locust.apis import endpoints_of
from llm_locust.config.options import add_arguments
from llm_locust.config.web_access import web_origins
from llm_locust.errors import ConfigError
from llm_locust.option_values import as_list
from llm_locust.runtime import link_auth
from llm_locust.runtime.results_folder import check_command_line
from llm_locust.runtime.runner_ops import await_workers, keep_csv_files_open, parse_locust_defaults_once
from llm_locust.runtime.state import RunState
from llm_locust.runtime.users_part import UsersPart
from llm_locust.transport import patches
from llm_locust.workload.providers import check_api

logger = logging.getLogger("llm_locust")

_states: weakref.WeakKeyDictionary[Environment, RunState] = weakref.WeakKeyDictionary()
_installed: weakref.WeakSet[Any] = weakref.WeakSet()
"""The state of each environment and the event hooks installed on: Locust hands listeners and users only the
`Environment`, so this weak mapping is where a user finds its process's state (`run_state`). Weak: a finished
environment (tests create many) takes its state with it."""


def install(events: Any) -> None:
    """Register llm-locust's listeners on Locust's `events`, adjust geventhttpclient's connection pool
    (`transport.patches.install`) and authenticate the master–worker link (`link_auth.install`) — all idempotent."""
    patches.install()
    link_auth.install()
    if events in _installed:
        return
    _installed.add(events)
    events.init_command_line_parser.add_listener(add_arguments)
    events.init_command_line_parser.add_listener(check_command_line)
    events.init_command_line_parser.add_listener(link_auth.check_command_line)
    events.init.add_listener(_on_init)


def run_state(environment: Environment) -> RunState:
    """The llm-locust state of `environment`; ConfigError if the locustfile did not install it.

    Created here when users come first: a worker can get its spawn message while it still waits
    for the master's ack, before Locust fires `init`.
    """
    state = _states.get(environment)
    if state is None:
        if environment.events not in _installed:
            raise ConfigError("llm-locust is not installed: call llm_locust.plugin.install(events) in the locustfile")
        state = _states[environment] = RunState(environment)
    return state


def user_context(environment: Environment) -> UsersPart:
    """What a user of `environment` reaches of its process's state: the users part (`llm_client.UserContext`), never
    the lead's; ConfigError if the locustfile did not install llm-locust."""
    users = run_state(environment).users
    assert users is not None, "a master runs no user"
    return users


def _check_agents(settings: Any, user_classes: Any) -> None:
    """ConfigError when agent users (`ApiUser.agent`) have no tools to call, or are asked for multi-turn sessions."""
    if not any(getattr(user, "agent", False) for user in user_classes or ()):
        return
    if not settings.workload.tool_sets:
        raise ConfigError("agent sessions need tools to call: pass --tools N (synthetic schemas) or --tools-file PATH")
    if str(settings.workload.session_turns) != "1":
        raise ConfigError("--session-turns: an agent session is one user prompt and its tool steps (--max-agent-steps)")
    if settings.workload.dataset or settings.load.trace:
        raise ConfigError("agent sessions make their own prompts (--prompt-tokens): leave out --dataset and --trace")


def _on_init(environment: Environment, runner: Any = None, web_ui: Any = None, **_: Any) -> None:
    """Create the run state (and the LLM view on a web UI); a bad option ends the process with a
    one-line error (exit 2)."""
    try:
        state = _states.get(environment) or RunState(environment)
        lead = state.lead
        if lead is not None:
            _check_shape(state.settings, environment.shape_class)
        settings = state.settings
        for endpoint in endpoints_of(environment.user_classes):
            check_api(
                settings.endpoint.provider,
                settings.endpoint.server_family,
                endpoint,
                settings.workload.ignore_eos,
                settings.endpoint.client,
                tools=bool(settings.workload.tool_sets),
                response_format=settings.workload.response_format,
            )
        _check_agents(settings, environment.user_classes)
        origins = web_origins(as_list(getattr(environment.parsed_options, "web_origin", None)))
        if state.users is not None and lead is not None:  # a local runner's own bearer token, before any request
            state.users.start_auth()  # (`UsersPart.start_auth`); a worker's at each test's start, refusing it if none
        _states[environment] = state
        if lead is None:  # a worker
            parse_locust_defaults_once()
        elif getattr(environment.parsed_options, "csv_prefix", None):
            environment.events.quit.add_listener(keep_csv_files_open)
    except ConfigError as e:
        for line in str(e).splitlines():  # one error line per problem (e.g. each bad --host URL)
            logger.error("%s", line)
        sys.exit(2)
    if web_ui is not None and lead is not None:  # a worker has no web UI
        from llm_locust.runtime import web_guard  # Flask and the page only where a web UI runs
        from llm_locust.runtime.webui import attach

        attach(web_ui, lead.live)
        _hide_secret_defaults(web_ui, distributed=lead.is_master)
        web_guard.install(web_ui, state.settings.endpoint.allow_host, origins)
    options = environment.parsed_options
    if lead is not None and lead.is_master and getattr(options, "headless", False):
        await_workers(runner, getattr(options, "expect_workers", 1))
    # The event loop's clock is read once per loop iteration, and the loop has not run since Locust created it:
    # Locust's headless --run-time timer (gevent.spawn_later, armed right after init) would count from that stale
    # time and end the run early by the whole start-up (a -t 2s run stopped after 0.2 s on a loaded machine).
    gevent.get_hub().loop.update_now()


def _check_shape(settings: Any, shape: Any) -> None:
    """ConfigError when the load options and the locustfile's load shape do not go together."""
    searching = bool(getattr(shape, "capacity_search", False))
    if settings.load.steps and shape is None:
        raise ConfigError("--sweep-users / --sweep-rates need the sweep's load shape: run -f locustfiles/sweep.py")
    if settings.load.search_max_rate and not searching:
        raise ConfigError("--search-max-rate needs the search's load shape: run -f locustfiles/search.py")
    if searching and not settings.load.search_max_rate:
        raise ConfigError("locustfiles/search.py needs --search-max-rate R: the highest request rate tried, req/s")


def _hide_secret_defaults(web_ui: Any, distributed: bool) -> None:
    """Keep secret option values (--api-key, --header) out of the web UI's page, and on a master (`distributed`) the
    secret fields out of its form.

    Locust masks the input field of an `is_secret` option, but writes the value given on the
    command line or in a config file into the page as the field's default, readable by anyone
    who opens the UI. The default is blanked (and the page redacted: the host field shows URL
    credentials as [REDACTED], `webui`); a test started with a secret field left empty uses the
    value given at start-up, one started with the host as shown the host of the last test
    (`shared.Shared.rebuild`). A master's workers take their secrets from their own environment, never from
    the master (`secret_wire`): a key typed into a master's form could reach no worker, so the field is not there
    and `web_guard` refuses it when posted.
    """
    update = web_ui.update_template_args

    def update_without_secrets() -> None:
        update()
        options = web_ui.template_args.get("extra_options", {})
        for name, option in list(options.items()):
            if option.get("is_secret"):
                if distributed:
                    del options[name]
                else:
                    option["default_value"] = ""

    web_ui.update_template_args = update_without_secrets
    update_without_secrets()
