"""Load-test image generation (POST /v1/images/generations): time to the first partial image, images/s, E2E.

    locust -f locustfiles/images.py --host http://127.0.0.1:8000 --model NAME \
        --headless -u 4 -r 1 --run-time 2m

Streamed with 2 partial images per image: TTFT is the time to the first partial image, each gap between images an
ITL sample. `--extra-body '{"size": "1536x1024", "quality": "high", "n": 2, "partial_images": 3}'` changes the
request; `--extra-body '{"stream": false}'` asks for one JSON body (its latency is E2E).
"""

from locust import events

from llm_locust.runtime.plugin import install
from llm_locust.runtime.users import ImagesUser

install(events)


class ImageUser(ImagesUser):
    """One simulated client sending image-generation requests back to back."""
