"""Configuration: llm-locust's command-line options and the validated, typed `Settings` built from them.

Seam out: one `Settings` value passed down to every stage. Pure: no Locust, no gevent.
"""
