"""llm-locust: Locust-based, distributed load tests for LLM inference endpoints.

Importing this package has no side effects: in particular it does not import Locust (which
monkey-patches the standard library). The Locust integration lives in `llm_locust.runtime.users` and
`llm_locust.runtime.plugin`; the simulator in `llm_locust.sim`.
"""

__version__ = "0.1.0"
