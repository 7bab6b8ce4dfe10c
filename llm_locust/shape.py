"""Kept import path for locustfiles: `from llm_locust.shape import SweepShape` (the shape lives in `load/`)."""

from llm_locust.load.shape import SweepShape

__all__ = ["SweepShape"]
