"""Image inputs for vision models: local files or generated PNGs, as `image_url` data URLs.

Generated images are blocks of random colours (16×16-pixel cells), different for every image,
encoded as PNG with zlib — no imaging library needed. Each process generates a pool of
`POOL_SIZE` images per size once and users pick from it, so the load generator's CPU goes to
the requests, not to image encoding.
"""

from __future__ import annotations

import base64
import random
import struct
import zlib
from functools import lru_cache
from pathlib import Path

import numpy as np

from llm_locust.errors import ConfigError

POOL_SIZE = 16
_CELL_PX = 16
_MIME_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp",
               ".gif": "image/gif"}  # fmt: skip


def parse_size(text: str) -> tuple[int, int]:
    """'WIDTHxHEIGHT' in pixels -> (width, height); ConfigError naming --image-size if invalid."""
    width, x, height = text.lower().partition("x")
    if not (x and width.isdigit() and height.isdigit() and 1 <= int(width) <= 8192 and 1 <= int(height) <= 8192):
        raise ConfigError(f"--image-size {text!r}: expected WIDTHxHEIGHT in pixels, each 1..8192, e.g. 512x512")
    return int(width), int(height)


def png_bytes(width: int, height: int, rng: random.Random) -> bytes:
    """A PNG (8-bit RGB) of random colour cells, `width`×`height` pixels."""
    cells = np.random.default_rng(rng.getrandbits(64)).integers(
        0, 256, size=((height + _CELL_PX - 1) // _CELL_PX, (width + _CELL_PX - 1) // _CELL_PX, 3), dtype=np.uint8
    )
    pixels = cells.repeat(_CELL_PX, axis=0).repeat(_CELL_PX, axis=1)[:height, :width]
    rows = np.concatenate([np.zeros((height, 1), np.uint8), pixels.reshape(height, width * 3)], axis=1)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
        + _chunk(b"IEND", b"")
    )


def _chunk(kind: bytes, data: bytes) -> bytes:
    """One PNG chunk: length, type, data, CRC."""
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def data_url(data: bytes, mime_type: str) -> str:
    """`data:<mime>;base64,...` for `data`."""
    return f"data:{mime_type};base64,{base64.b64encode(data).decode('ascii')}"


@lru_cache(maxsize=32)
def file_data_url(path: str) -> str:
    """The data URL of a local image file (read once per process); ConfigError naming --image."""
    mime_type = _MIME_TYPES.get(Path(path).suffix.lower())
    if mime_type is None:
        raise ConfigError(f"--image {path}: unknown image type; use one of {', '.join(sorted(_MIME_TYPES))}")
    try:
        return data_url(Path(path).read_bytes(), mime_type)
    except OSError as e:
        raise ConfigError(f"--image {path}: cannot read it ({e.strerror or e})") from None


@lru_cache(maxsize=4)
def generated_pool(width: int, height: int, seed: int | None) -> tuple[str, ...]:
    """`POOL_SIZE` distinct generated PNG data URLs of one size (made once per process)."""
    rng = random.Random(f"images/{seed}/{width}x{height}")
    return tuple(data_url(png_bytes(width, height, rng), "image/png") for _ in range(POOL_SIZE))


def image_part(url: str) -> dict[str, object]:
    """An OpenAI chat content part carrying the image at `url`."""
    return {"type": "image_url", "image_url": {"url": url}}
