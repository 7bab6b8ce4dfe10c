"""The APIs llm-locust measures, and which parser reads each one's stream: the endpoint name on every record
(`RequestRecord.endpoint`) is a key here.

Streamed over SSE: `chat` and `completions` (OpenAI chunks, `protocol.apply_event`), `responses` (OpenAI
Responses API events, `responses_stream`), `messages` (Anthropic Messages events, `messages_stream`). Not streamed:
`embeddings` (one JSON response, read by `transport.client.embed`).
"""

from __future__ import annotations

from llm_locust.metrics import messages_stream, responses_stream
from llm_locust.metrics.protocol import EventApplier, apply_event

EVENT_APPLIERS: dict[str, EventApplier] = {
    "chat": apply_event,
    "completions": apply_event,
    "responses": responses_stream.apply_event,
    "messages": messages_stream.apply_event,
}
"""The stream parser of each streamed API."""
STREAMED = tuple(EVENT_APPLIERS)
"""The endpoints whose responses are SSE streams."""
ENDPOINTS = (*STREAMED, "embeddings")
"""Every endpoint a user can send to."""
