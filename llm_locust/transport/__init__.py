"""Stage 3, transport: send one request and timestamp every byte of its answer (geventhttpclient, SSE pump, TLS,
proxies).

Seam in: a `workload.builder.RequestSpec` and a `load.pacing.Ticket`; seam out: a finished
`metrics.record.RequestRecord` fired with Locust's request event. The geventhttpclient patches are applied by
`patches.install()`, never at import.
"""
