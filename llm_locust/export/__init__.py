"""Side stage, export: the run's client metrics live, where operators look — a Prometheus endpoint
(`--prometheus-port`) and an OpenTelemetry push (Locust's `--otel`), both from the merged worker deltas.

Seam in: each `metrics.recorder.Delta` the master (or local runner) merges, and a `LiveGauges` sample; seam out:
Prometheus metric families (`prometheus`) and OTel instruments (`otlp`). Pure: no Locust, no gevent (the HTTP server
and the process's hooks are in `runtime/live_export.py`).
"""
