"""llm-locust: Locust-based, distributed load tests for LLM inference endpoints.

Importing this package has no side effects: in particular it does not import Locust (which
monkey-patches the standard library). The Locust integration lives in `llm_locust.users` and
`llm_locust.plugin`; the simulator in `llm_locust.sim`.
"""

__version__ = "0.1.0"
