"""A process's short-lived bearer token (`TokenKeeper`): the first one fetched before any request is sent, then
replaced ahead of its expiry by a greenlet, so that no request waits for a token and none goes with an expired one.

Each process (local runner, every worker) fetches its own with its own environment's credentials: nothing crosses the
master–worker wire. When (`tokens.refresh_after_s`) and what a failed refresh means (`tokens.after_failure`) are pure
decisions of `transport.tokens`; the token libraries' blocking HTTP (requests, urllib3) yields to the hub under
gevent's monkey-patching, as Locust's own does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import gevent

from llm_locust import redact
from llm_locust.transport.tokens import BearerAuth, Token, after_failure, refresh_after_s

logger = logging.getLogger("llm_locust")

STOP_WAIT_S = 5.0
"""The longest `TokenKeeper.stop` waits for a refresh under way."""


class TokenKeeper:
    """The token of one flow in one process: `auth` (what every user's transport sends), `refreshes` (tokens fetched
    after the first), `refresh_failures` (failed attempts). `start()` fetches the first token (ConfigError when the
    credentials are missing or refused) and starts the refreshing greenlet; `stop()` ends it."""

    def __init__(self, flow: str, fetch: Callable[[], Token]) -> None:
        self.flow = flow
        self._fetch = fetch
        self.auth = BearerAuth("")
        self.refreshes = 0
        self.refresh_failures = 0
        self._expires_s = 0.0  # time.monotonic() when the current token expires
        self._greenlet: gevent.Greenlet | None = None
        self._fetching = False  # a refresh is under way
        self._stopping = False

    def start(self) -> None:
        """Fetch the first token now (ConfigError if refused) and keep it fresh from now on."""
        token = self._take(self._fetch())
        logger.info("OAuth (%s): token fetched, valid %.0f s", self.flow, token.lifetime_s)
        self._greenlet = gevent.spawn(self._keep, token.lifetime_s)

    def stop(self) -> None:
        """Stop refreshing: at once while it waits; a refresh under way ends first (`STOP_WAIT_S` at most), so that
        a token the server issued is counted in `refreshes` (and not fetched for nothing)."""
        greenlet, self._greenlet = self._greenlet, None
        if greenlet is None:
            return
        self._stopping = True
        if self._fetching:
            greenlet.join(STOP_WAIT_S)
        greenlet.kill(block=False)

    def _take(self, token: Token) -> Token:
        redact.register(token.value)  # before anything could print it
        self.auth.token = token.value
        self._expires_s = time.monotonic() + token.lifetime_s
        return token

    def _keep(self, lifetime_s: float) -> None:
        """Replace the token ahead of its expiry until stopped."""
        pause_s, failures, said_expired = refresh_after_s(lifetime_s), 0, False
        while not self._stopping:
            gevent.sleep(pause_s)
            self._fetching = True
            try:
                token = self._take(self._fetch())
            except Exception as e:  # ConfigError from the source, or anything its library raised
                failures += 1
                self.refresh_failures += 1
                pause_s, expired = after_failure(self._expires_s - time.monotonic(), failures)
                if expired and not said_expired:
                    logger.error("OAuth (%s): the token expired and its refresh fails: %s", self.flow, e)
                else:
                    logger.warning("OAuth (%s): refresh failed (retrying in %.1f s): %s", self.flow, pause_s, e)
                said_expired = said_expired or expired
                continue
            finally:
                self._fetching = False
            self.refreshes += 1
            failures, said_expired = 0, False
            pause_s = refresh_after_s(token.lifetime_s)
