"""Stage 4, metrics: the per-request record and its metric formulas, the SSE/protocol decoders that fill it, the
mergeable histograms, SLOs, drift windows, gates and the vocabulary (metric names, units, statistics).

Seam in: a `record.RequestRecord`; seam out: `window.WindowMetrics` / `RunMetrics`. Pure: no Locust, no gevent.
"""
