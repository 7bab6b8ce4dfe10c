"""The Locust wiring: options, per-process lifecycle, worker→master messages, users, the web UI page and process health
(event-loop saturation, GC policy, signals, CPU/memory monitor).

The only package (with `transport/`) that imports Locust or gevent; it connects the stages and owns nothing they
compute.
"""
