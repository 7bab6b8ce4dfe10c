"""The built-in simulator (`llm-locust sim`): an OpenAI-compatible server with known timing.

Modules: `config` (settings), `engine` (timing models, no I/O), `timeline` (absolute-time
scheduling on the event loop), `drivers` (engine + timeline glue), `http` (request parsing,
framing), `openai` (wire format), `stream` (one response being written), `prefix_cache` (the LRU of
512-token blocks), `trace` (ground truth),
`metrics` (/metrics), `exporters` (/gpu-metrics, /node-metrics), `connection` (one client
connection, kernel-stamped reads), `server` (routes and serving), `cli` (the `sim` sub-command)
and `process` (`run_sim`: the simulator as a subprocess, for tests and benchmarks).
"""

from llm_locust.sim.process import SimProcess, SimStartError, run_sim

__all__ = ["SimProcess", "SimStartError", "run_sim"]
