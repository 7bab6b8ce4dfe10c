"""Helpers shared by the tests (imported as `harness.<module>`; tests/ is on sys.path through its conftest.py).

Loopback servers (`recording_server`, `proxy_server`, `sse_server`), Locust with its web UI (`web_ui`), headless
Chromium (`browser`), the report's figure readers (`report_figures`), secret scans and error lines (`output`),
the distributed run's commands (`topology`), the Grafana dashboard's
queries (`dashboard`), a stream's kept text through its API's reader (`kept_text`) and small pure helpers
(`tokenizer`, `stats`, `sim_requests`).
No test module imports another test module: what two of them share lives here or in conftest.py."""
