"""The web UI, kept to what a visitor may decide, and to visitors who opened it: no page of another origin changes
its state, and its start form and user-class edit reach no file, folder, URL, port, foreign host, proxy or header.

Locust's POST /swarm copies every posted field that names an option into the run's options, and its host field into
the run's host; its POST /user sets any attribute of a user class (`proxy_host`, `proxy_port`, ...); neither asks
where the request came from. `install` guards them so that, before Locust sees the request:

- a state-changing request (any method but GET, HEAD and OPTIONS — Locust's /swarm, /user, /stop, /stats/reset, a
  locustfile's own —, and GET /llm/report, which builds a file) that a browser sent from a page of another origin is
  refused: HTTP 403, one line naming the page's origin (`config.web_access.cross_origin_refusal`; a client that sends
  no `Origin`, `Referer` nor `Sec-Fetch-Site` — curl, a script — is no browser and passes; `--web-origin` names the
  origins of a reverse proxy);
- a POST /user that sets anything but a user class's tasks, weight and fixed count is refused: HTTP 400, one line
  naming the field (`config.web_access.user_edit_refusal`);
- a form field that the form does not show — a `startup_only` option (declared on its settings field) or one of
  Locust's own — is refused: HTTP 400, one line naming the field (`config.web_access.form_refusal`);
- a host whose server is not one of --host's, --allow-host's or the locustfile's user classes' (as given when the
  process started) is refused in the form's own answer (`{"success": false, "message": ...}`, which Locust's page
  shows; `transport.replicas.host_refusal`);
- a new test whose results folder cannot be made or written is refused the same way, naming the folder and the
  system's reason (`results_folder.start_refusal`).

Nothing is started, changed or sent then. It also says once, in the log, where the UI listens and how to expose it
safely (`config.web_access.exposure_line`).
"""

from __future__ import annotations

import functools
import json
import logging
import socket
from collections.abc import Callable
from typing import Any

from flask import Response, jsonify, request
from locust.runners import STATE_RUNNING, STATE_SPAWNING

from llm_locust.config.web_access import (
    SAFE_METHODS,
    cross_origin_refusal,
    exposure_line,
    form_refusal,
    user_edit_refusal,
)
from llm_locust.runtime.results_folder import start_refusal
from llm_locust.transport.replicas import host_refusal, split_hosts

logger = logging.getLogger("llm_locust")


STATE_CHANGING_GETS = frozenset({"llm_locust.report"})
"""Endpoints that change something although their method is GET: /llm/report builds report.html in a subprocess."""


def install(web_ui: Any, allow_host: tuple[str, ...], web_origins: tuple[str, ...] = ()) -> None:
    """Guard `web_ui` (see the module docstring): the hosts allowed are those of the environment's host now,
    `allow_host` (--allow-host) and the user classes' own; the pages allowed to change its state are its own and those
    of `web_origins` (--web-origin); log `exposure_line` once."""
    environment = web_ui.environment
    classes = {*(environment.user_classes or ()), *(environment.available_user_classes or {}).values()}
    allowed = (*split_hosts(environment.host), *allow_host, *(c.host for c in classes if getattr(c, "host", None)))
    options = set(vars(environment.parsed_options)) if environment.parsed_options is not None else set()
    names = {socket.gethostname(), web_ui.host}  # this machine's: a page of such a name is no DNS rebinding

    def shown() -> set[str]:
        if "extra_options" not in web_ui.template_args:  # computed by Locust when its runner exists
            web_ui.update_template_args()
        return set(web_ui.template_args.get("extra_options", {}))

    def same_origin_only() -> Response | None:
        if request.method in SAFE_METHODS and request.endpoint not in STATE_CHANGING_GETS:
            return None
        headers = request.headers
        why = cross_origin_refusal(
            f"{request.scheme}://{request.host}", headers.get("Sec-Fetch-Site"), headers.get("Origin"),
            headers.get("Referer"), web_origins, names,
        )  # fmt: skip
        return None if why is None else _refuse(f"{request.method} {request.path}: {why}", environment, 403)

    def check_swarm() -> Response | None:
        refusal = form_refusal(request.form.keys(), options, shown())
        if refusal is not None:
            return _refuse(refusal, environment, 400)
        why = host_refusal(request.form.get("host", ""), allowed)
        if why is None and environment.runner.state not in (STATE_SPAWNING, STATE_RUNNING):  # a new test would start
            why = start_refusal(environment.parsed_options)
        return None if why is None else _refuse(why, environment, 200)  # 200: Locust's page shows the message

    def check_user() -> Response | None:
        try:
            posted = json.loads(request.data)
        except ValueError:
            posted = None
        name = posted.get("user_class_name") if isinstance(posted, dict) else None
        user_class = (environment.available_user_classes or {}).get(name) if isinstance(name, str) else None
        why = user_edit_refusal(posted, getattr(user_class, "host", None))
        return None if why is None else _refuse(why, environment, 400)

    web_ui.app.before_request(same_origin_only)
    _guard(web_ui, "locust.swarm", check_swarm)
    _guard(web_ui, "locust.update_user", check_user)
    logger.info("%s", exposure_line(web_ui.host, web_ui.port, bool(web_ui.web_login)))


def _guard(web_ui: Any, endpoint: str, check: Callable[[], Response | None]) -> None:
    """Run `check` before Locust's view of `endpoint`, behind the UI's login; its answer, when it has one, instead."""
    view = web_ui.app.view_functions[endpoint]

    @functools.wraps(view)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        refused = check()
        return view(*args, **kwargs) if refused is None else refused

    web_ui.app.view_functions[endpoint] = web_ui.auth_required_if_enabled(guarded)


def _refuse(message: str, environment: Any, status: int) -> Response:
    """Locust's own form of a refused start, with `status`; the refusal logged."""
    logger.warning("web UI: %s", message)
    response = jsonify({"success": False, "message": message, "host": environment.host})
    response.status_code = status
    return response
