"""Stage 5, results: the results folder — summary.json built from a finished run, the time series CSV, histograms.json
and the console table.

Seam in: `metrics.run_metrics.RunMetrics` and run facts; seam out: files read by `report/`. Pure: no Locust, no
gevent.
"""
