"""Kept import path for locustfiles: `from llm_locust.plugin import install` (the wiring lives in `runtime/`)."""

from llm_locust.runtime.plugin import install

__all__ = ["install"]
