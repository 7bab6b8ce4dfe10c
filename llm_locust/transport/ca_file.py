"""A CA bundle file (--ca-bundle, REQUESTS_CA_BUNDLE) checked before any connection; no gevent, for `config`."""

from __future__ import annotations

from llm_locust.errors import ConfigError


def check_ca_file(path: str, source: str) -> None:
    """Raise ConfigError naming `source` (an option or variable) unless `path` is a readable PEM CA file."""
    try:
        with open(path, "rb") as f:
            text = f.read()
    except FileNotFoundError:
        raise ConfigError(f"{source} {path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{source} {path}: a directory; give a PEM file of CA certificates") from None
    except OSError as e:
        raise ConfigError(f"{source} {path}: cannot read it ({e.strerror})") from None
    if b"-----BEGIN CERTIFICATE-----" not in text:
        raise ConfigError(f"{source} {path}: no PEM certificate in it (-----BEGIN CERTIFICATE-----)")
