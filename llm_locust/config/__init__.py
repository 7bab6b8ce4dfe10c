"""Configuration: llm-locust's command-line options and the `Settings` assembled from them, one validated group
per stage (each defined and checked in its stage's `settings` module).

Seam out: one `Settings` value; the wiring (`runtime/`) hands each stage its own group. Pure: no Locust, no gevent.
"""
