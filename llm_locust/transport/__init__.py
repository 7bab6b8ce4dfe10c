"""Stage 3, transport: send one request and timestamp every byte of its answer (geventhttpclient, SSE pump, TLS,
proxies).

Seam in: one `request.Prepared` (body, path, headers, ticket, replica, cancellation, its `Api`), made by the user
from a `workload.builder.RequestSpec` and a `load.pacing.Ticket`, handed to the user's `request.Transport`
(`client.FastTransport` or `sdk_client.SdkTransport`); seam out: `send(prepared)` returns the finished
`metrics.record.RequestRecord`, also fired with Locust's request event. The geventhttpclient patches are applied by
`patches.install()`, never at import.
"""
