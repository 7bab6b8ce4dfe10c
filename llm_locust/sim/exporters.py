"""GET /gpu-metrics and GET /node-metrics: telemetry pages in the exporters' formats, to test
`--metrics-url` telemetry without a GPU.

/gpu-metrics is SIMULATED: NVIDIA DCGM-exporter's text format (its gpuMetricsFormat: `# HELP`,
`# TYPE`, one line per GPU labelled `gpu, UUID, pci_bus_id, device, modelName, Hostname`), with
values that follow the simulator's real batch occupancy. With u = round(100 x running /
max_batch), identical on every GPU (tensor parallel), GPU i (0-based) shows:

    DCGM_FI_DEV_GPU_UTIL           u                            (%)
    DCGM_FI_DEV_FB_USED            20480 + round(409.6 u)       (MiB; weights + KV cache)
    DCGM_FI_DEV_FB_FREE            81559 - FB_USED              (MiB; an 80 GB card)
    DCGM_FI_DEV_POWER_USAGE        70 + 6.3 u + 5 i             (W)
    DCGM_FI_DEV_GPU_TEMP           35 + round(0.4 u) + i        (C)
    DCGM_FI_DEV_SM_CLOCK           1980 when u > 0, else 345    (MHz)
    DCGM_FI_PROF_GR_ENGINE_ACTIVE  u / 100                      (ratio)
    DCGM_FI_PROF_DRAM_ACTIVE       0.6 u / 100                  (ratio)

/node-metrics is REAL: node-exporter's names and labels for this machine's /proc/stat
(`node_cpu_seconds_total{cpu, mode}`, ticks / USER_HZ), /proc/meminfo
(`node_memory_MemTotal_bytes`, `node_memory_MemAvailable_bytes`), /proc/loadavg (`node_load1`)
and /proc/net/dev (`node_network_receive_bytes_total{device}`, `..._transmit_bytes_total`).
Linux only; elsewhere the answer is a 404.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

FB_TOTAL_MIB = 81559
CPU_MODES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
"""The modes of /proc/stat's cpuN lines node-exporter exports, in the file's order."""


def gpu_util_pct(running: int, max_batch: int) -> int:
    """The simulated GPU utilisation: the running batch's share of `max_batch`, in whole %."""
    return round(100 * min(1.0, running / max_batch)) if max_batch > 0 else 0


def render_gpu(gpus: int, running: int, max_batch: int, model: str) -> bytes:
    """The DCGM-exporter page of `gpus` simulated GPUs at this batch occupancy."""
    u = gpu_util_pct(running, max_batch)
    fb_used = 20480 + round(409.6 * u)
    host = socket.gethostname()
    fields = (
        ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", lambda i: str(1980 if u else 345)),
        ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", lambda i: str(35 + round(0.4 * u) + i)),
        ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", lambda i: f"{70 + 6.3 * u + 5 * i:.6f}"),
        ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", lambda i: str(u)),
        ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", lambda i: str(FB_TOTAL_MIB - fb_used)),
        ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", lambda i: str(fb_used)),
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.",
         lambda i: f"{u / 100:.6f}"),
        ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge",
         "Ratio of cycles the device memory interface is active sending or receiving data.",
         lambda i: f"{0.6 * u / 100:.6f}"),
    )  # fmt: skip
    lines = []
    for name, kind, help_text, value in fields:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for i in range(gpus):
            labels = (
                f'gpu="{i}",UUID="GPU-5f1a0000-0000-4000-8000-{i:012d}",pci_bus_id="00000000:{0x18 + i:02X}:00.0",'
                f'device="nvidia{i}",modelName="llm-locust simulated GPU ({model})",Hostname="{host}"'
            )
            lines.append(f"{name}{{{labels}}} {value(i)}")
    return ("\n".join(lines) + "\n").encode()


def render_node(proc: Path = Path("/proc")) -> bytes | None:
    """The node-exporter page of this host from `proc`; None where /proc is missing (not Linux)."""
    try:
        stat = (proc / "stat").read_text().splitlines()
        meminfo = (proc / "meminfo").read_text().splitlines()
        loadavg = (proc / "loadavg").read_text().split()
        netdev = (proc / "net" / "dev").read_text().splitlines()[2:]
    except OSError:
        return None
    hz = os.sysconf("SC_CLK_TCK")
    lines = ["# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.",
             "# TYPE node_cpu_seconds_total counter"]  # fmt: skip
    for line in stat:
        name, *ticks = line.split()
        if name.startswith("cpu") and name[3:].isdigit():
            for mode, count in zip(CPU_MODES, ticks, strict=False):
                lines.append(f'node_cpu_seconds_total{{cpu="{name[3:]}",mode="{mode}"}} {int(count) / hz}')
    memory = {k: int(v.split()[0]) * 1024 for k, _, v in (line.partition(":") for line in meminfo) if v.strip()}
    for field in ("MemAvailable", "MemTotal"):
        lines += [
            f"# HELP node_memory_{field}_bytes Memory information field {field}_bytes.",
            f"# TYPE node_memory_{field}_bytes gauge",
            f"node_memory_{field}_bytes {memory[field]}",
        ]
    lines += ["# HELP node_load1 1m load average.", "# TYPE node_load1 gauge", f"node_load1 {loadavg[0]}"]
    devices = [(name.strip(), counts.split()) for name, _, counts in (line.partition(":") for line in netdev)]
    for direction, column in (("receive", 0), ("transmit", 8)):
        name = f"node_network_{direction}_bytes_total"
        lines += [f"# HELP {name} Network device statistic {direction}_bytes.", f"# TYPE {name} counter"]
        lines += [f'{name}{{device="{device}"}} {counts[column]}' for device, counts in devices]
    return ("\n".join(lines) + "\n").encode()
