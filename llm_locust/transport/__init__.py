"""Stage 3, transport: send one request and timestamp every byte of its answer (geventhttpclient, SSE pump, TLS,
proxies).

Seam in: one `request.Prepared` (its `metrics.request.RequestSpec`, its record opened by the user with
`metrics.record.open_record`, path, headers, replica, cancellation, the wait for its due time, its `Api`), handed to
the user's `request.Transport` (`client.FastTransport` or `sdk_client.SdkTransport`); seam out: `send(prepared)`
returns the finished `metrics.record.RequestRecord`, which the user reports with Locust's request event. It imports
nothing of the workload, the load or the wiring: the token counter and the process's next send due reach it as
values. The geventhttpclient patches are applied by
`patches.install()`, never at import.
"""
