"""Stage 2, workload: what each user sends next — prompts, datasets, lengths, images, provider fields, token counts.

Seam out: `builder.Workload.next_request()` returns a `metrics.request.RequestSpec` (body, expected prompt tokens).
Pure: no Locust, no gevent.
"""
