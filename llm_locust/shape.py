"""Kept import path for locustfiles: `from llm_locust.shape import SweepShape` (the shape lives in `runtime/`)."""

from llm_locust.runtime.shape import SweepShape

__all__ = ["SweepShape"]
