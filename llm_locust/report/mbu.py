"""Memory bandwidth utilisation (MBU), as defined in Databricks' "LLM Inference Performance
Engineering: Best Practices":

    achieved bandwidth = (model weight bytes + KV-cache bytes) / TPOT
    MBU                = achieved bandwidth / peak memory bandwidth

Each decode step reads every weight (and the KV cache) once and yields one token per running
sequence, so TPOT is the decode step time. Meaningful at low batch, where decoding is memory
bound: e.g. a 7B model in 16-bit (14 GB) at TPOT 14 ms moves 1 TB/s, 50 % of a 2 TB/s GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_locust.errors import ConfigError

BYTES_PER_GB = 1e9


@dataclass(frozen=True)
class Hardware:
    """What the user told us: model size, bytes per parameter, peak bandwidth, KV-cache bytes."""

    model_params_b: float
    """Parameters, billions."""
    bytes_per_param: float
    """Bytes per weight: 2 for fp16/bf16, 1 for fp8/int8, 0.5 for 4-bit."""
    peak_bandwidth_gbs: float
    """Peak memory bandwidth of the serving hardware, GB/s (10^9 bytes/s), all GPUs of a replica."""
    kv_cache_gb: float = 0.0
    """KV-cache bytes read per decode step, GB (10^9 bytes); 0 when not given."""

    def __post_init__(self) -> None:
        for name in ("model_params_b", "bytes_per_param", "peak_bandwidth_gbs"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"--{name.replace('_', '-')} must be > 0, got {getattr(self, name)}")
        if self.kv_cache_gb < 0:
            raise ConfigError(f"--kv-cache-gb must be >= 0, got {self.kv_cache_gb}")

    @property
    def bytes_per_step(self) -> float:
        """Weight bytes + KV-cache bytes read per decode step."""
        return self.model_params_b * 1e9 * self.bytes_per_param + self.kv_cache_gb * BYTES_PER_GB


def achieved_bandwidth_gbs(hardware: Hardware, tpot_ms: float | None) -> float | None:
    """(weight + KV bytes) / TPOT in GB/s; None without a TPOT."""
    if tpot_ms is None or not tpot_ms > 0:
        return None
    return hardware.bytes_per_step / (tpot_ms / 1000.0) / BYTES_PER_GB


def mbu(hardware: Hardware, tpot_ms: float | None) -> float | None:
    """MBU as a fraction (0..1, above 1 means the inputs are wrong); None without a TPOT."""
    achieved = achieved_bandwidth_gbs(hardware, tpot_ms)
    return None if achieved is None else achieved / hardware.peak_bandwidth_gbs
