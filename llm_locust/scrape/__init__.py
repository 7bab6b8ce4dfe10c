"""Side stage, scrape: the server's own view — Prometheus metrics of inference servers, DCGM / node-exporter hardware
telemetry — scraped during the run into server_metrics.csv and telemetry.csv.

Seam in: --metrics-url; seam out: CSV files and summary.json's "server" section. Only `scraper` runs a greenlet.
"""
