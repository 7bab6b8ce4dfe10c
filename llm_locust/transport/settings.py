"""The transport's settings: the timeouts (`TimeoutSettings`) and the streams closed early (`CancelSettings`), each
option declared on its field, validated from Locust's parsed options by `from_options` (the endpoint's:
`transport.endpoint_settings`).

Pure (no Locust, no gevent): `config.settings` assembles them with the other stages' settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llm_locust.errors import ConfigError
from llm_locust.metrics.sse import DEFAULT_MAX_EVENT_BYTES
from llm_locust.option_values import above, at_least, between, build, option


@dataclass(frozen=True)
class TimeoutSettings:
    """The bounds on one request: connect, read (idle), first-token and whole-request timeouts, in seconds
    (`transport.timeouts`), and the largest line or event its stream may send, bytes (`max_event_bytes`,
    `metrics.sse.EventTooLarge`)."""

    connect_timeout_s: float = field(metadata=option("Timeout to open a connection, seconds", 10.0, check=above(0)))
    read_timeout_s: float = field(
        metadata=option(
            "Longest silence allowed while waiting for the response or between stream events, seconds",
            120.0,
            check=above(0),
        )
    )
    first_token_timeout_s: float = field(
        metadata=option(
            "Longest time allowed from sending a request to its first generated token, seconds", 300.0, check=above(0)
        )
    )
    request_timeout_s: float = field(
        metadata=option("Longest time allowed for one whole request, seconds", 600.0, check=above(0))
    )
    max_event_bytes: int = field(
        metadata=option(
            "Largest line or event a stream may send, bytes; over it the request fails as bad_stream at once "
            "(default 4 MiB)",
            DEFAULT_MAX_EVENT_BYTES,
            check=above(0),
        )
    )

    @classmethod
    def from_options(cls, options: Any) -> TimeoutSettings:
        """Validated from `options`: each > 0, else ConfigError naming it."""
        return build(cls, options)


@dataclass(frozen=True)
class CancelSettings:
    """The share of requests whose stream is closed early (`cancel_rate`), and when: after `cancel_after_tokens`
    token events or `cancel_after_ms` after sending (`transport.cancel`)."""

    cancel_rate: float = field(
        metadata=option(
            "Share of streams the client closes early (0..1), with --cancel-after-tokens or --cancel-after-ms; "
            "counted as cancelled, not failed",
            0.0,
            check=between(0, 1, "a fraction", "e.g. 0.2"),
        )
    )
    cancel_after_tokens: int = field(
        metadata=option("A cancelled stream is closed once this many token events have arrived", 0, check=at_least(0))
    )
    cancel_after_ms: float = field(
        metadata=option("A cancelled stream is closed this many ms after its request was sent", 0.0, check=at_least(0))
    )

    @classmethod
    def from_options(cls, options: Any) -> CancelSettings:
        """Validated from `options`: ConfigError naming an option out of its range or missing its partner."""
        rate, tokens, after_ms = options.cancel_rate, options.cancel_after_tokens, options.cancel_after_ms
        settings = build(cls, options)  # each alone checked first
        if tokens and after_ms:
            raise ConfigError("--cancel-after-tokens and --cancel-after-ms exclude each other: give one")
        if rate and not (tokens or after_ms):
            raise ConfigError("--cancel-rate needs --cancel-after-tokens N or --cancel-after-ms T (when to close)")
        if (tokens or after_ms) and not rate:
            raise ConfigError("--cancel-after-tokens / --cancel-after-ms need --cancel-rate P (the share to close)")
        if rate and options.client != "fast":
            raise ConfigError(
                "--cancel-rate needs the fast client (--client fast): the openai-sdk client cannot cancel"
            )
        return settings
