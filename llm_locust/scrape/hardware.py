"""GPU and host telemetry from a --metrics-url that is an NVIDIA DCGM-exporter or a Prometheus node-exporter.

`scraper.ServerScraper` detects the family of each URL from its first good answer: an inference
server (`server_maps`) first, else `detect()` here: any `DCGM_FI_*` metric is a DCGM-exporter
(family `dcgm`), `node_cpu_seconds_total` or `node_memory_MemTotal_bytes` a node-exporter
(family `node`). A `Reader` turns each good scrape into (device, metric, value) triples.

telemetry.csv is a *long* file, one row per value: `time, elapsed_s, url, family, device,
metric, value`. Why long rather than more columns of server_metrics.csv: the number of devices
is only known at the first scrape and differs between hosts (1 to 8+ GPUs, any number of
network interfaces), and each family has its own metrics; a wide file would need a column per
(device, metric) fixed when the file is opened. Long rows stay rectangular for any host, each
value keeps its unit in the metric's name, and `pandas.pivot` makes a wide frame when wanted.
Device `all` holds the aggregate over the devices of one scrape (the value the report plots);
the others are the per-device breakdown (`0`, `1`, ... by the exporter's `gpu` label, a MIG
instance as `0/mig1`; `eth0`, `lo`, ... by node-exporter's `device` label).

Metric names were checked against the exporters' sources: NVIDIA/dcgm-exporter
etc/default-counters.csv and etc/dcp-metrics-included.csv (field names, units: FB in MiB, power
in W, GPU_UTIL in %, DCGM_FI_PROF_* ratios 0..1) and internal/pkg/rendermetrics/render_metrics.go
(labels `gpu, UUID, pci_bus_id, device, modelName[, Hostname]`); the DCGM 4.6 renames
(DCGM_FI_DEV_BOARD_POWER_WATTS, DCGM_FI_DEV_GPU_TEMP_CELSIUS, DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO,
from go-dcgm's alias tests) are accepted as second names. prometheus/node_exporter
collector/cpu_linux.go (`node_cpu_seconds_total{cpu, mode}`, modes user nice system idle iowait
irq softirq steal), collector/meminfo (`node_memory_<field>_bytes`), collector/loadavg.go
(`node_load1`) and collector/netdev_common.go (`node_network_<stat>_total{device}`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

TELEMETRY_COLUMNS = ("time", "elapsed_s", "url", "family", "device", "metric", "value")
"""Columns of telemetry.csv (long format: one row per device, metric and scrape)."""
ALL_DEVICES = "all"
"""The device of the aggregate rows."""
FAMILIES = ("dcgm", "node")
LOOPBACK = "lo"
"""Left out of the network aggregate (traffic that never leaves the host); still in the breakdown."""

Triple = tuple[str, str, float]
"""(device, metric, value) of one scrape."""


@dataclass(frozen=True, slots=True)
class GpuGauge:
    """One DCGM field: our metric name (unit in it), the exporter's names (first present wins),
    the factor to our unit, and how the devices aggregate ("mean", "sum" or "max")."""

    metric: str
    names: tuple[str, ...]
    aggregate: str
    scale: float = 1.0


GPU_GAUGES = (
    GpuGauge("gpu_util_pct", ("DCGM_FI_DEV_GPU_UTIL",), "mean"),
    GpuGauge("fb_used_mib", ("DCGM_FI_DEV_FB_USED",), "sum"),
    GpuGauge("fb_free_mib", ("DCGM_FI_DEV_FB_FREE",), "sum"),
    GpuGauge("power_w", ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_BOARD_POWER_WATTS"), "sum"),
    GpuGauge("temp_c", ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_GPU_TEMP_CELSIUS"), "max"),
    GpuGauge("sm_clock_mhz", ("DCGM_FI_DEV_SM_CLOCK",), "mean"),
    GpuGauge("gr_engine_active_pct", ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO"), "mean",
             100.0),
    GpuGauge("dram_active_pct", ("DCGM_FI_PROF_DRAM_ACTIVE",), "mean", 100.0),
)  # fmt: skip
"""The DCGM fields read; `fb_used_pct` = 100 x used / (used + free) is derived per GPU and overall."""
DCGM_BLANK_MIN = 0x7FFFFFF0
"""DCGM writes a blank sentinel where it has no value (dcgm_structs.h: DCGM_INT32_BLANK 0x7ffffff0,
DCGM_FP64_BLANK 2**47, DCGM_INT64_BLANK 0x7ffffffffffffff0, each + 1..15 for the reason): no
field read here reaches the smallest, so a value from it up is skipped."""


def detect(names: set[str]) -> str | None:
    """The telemetry family of a page whose metric (and sample) names are `names`; None if neither."""
    if any(name.startswith("DCGM_FI_") for name in names):
        return "dcgm"
    if "node_cpu_seconds_total" in names or "node_memory_MemTotal_bytes" in names:
        return "node"
    return None


def _samples(families: dict[str, Any], name: str) -> list[Any]:
    """The samples named `name` (a counter's `_total` sample too) of the parsed page."""
    family = families.get(name) or families.get(name.removesuffix("_total"))
    if family is None:
        return []
    return [s for s in family.samples if s.name in (name, f"{name}_total") and math.isfinite(s.value)]


def _aggregate(how: str, values: list[float]) -> float:
    return {"mean": sum(values) / len(values), "sum": sum(values), "max": max(values)}[how]


class DcgmReader:
    """Per-GPU gauges of a DCGM-exporter page and their aggregate over the GPUs."""

    def read(self, families: dict[str, Any], epoch_s: float) -> list[Triple]:
        """(device, metric, value) for every GPU and field found, then the `all` aggregates."""
        per_gpu: dict[str, dict[str, float]] = defaultdict(dict)
        for gauge in GPU_GAUGES:
            name = next((n for n in gauge.names if _samples(families, n)), None)
            for sample in _samples(families, name) if name else ():
                if sample.value >= DCGM_BLANK_MIN:
                    continue
                device = sample.labels.get("gpu", "?")
                if "GPU_I_ID" in sample.labels:
                    device += f"/mig{sample.labels['GPU_I_ID']}"
                per_gpu[device][gauge.metric] = sample.value * gauge.scale
        triples: list[Triple] = []
        for device in sorted(per_gpu, key=_device_order):
            values = per_gpu[device]
            if "fb_used_mib" in values and "fb_free_mib" in values:
                values["fb_used_pct"] = _share_pct(values["fb_used_mib"], values["fb_free_mib"])
            triples += [(device, metric, value) for metric, value in values.items()]
        for gauge in GPU_GAUGES:
            found = [values[gauge.metric] for values in per_gpu.values() if gauge.metric in values]
            if found:
                triples.append((ALL_DEVICES, gauge.metric, _aggregate(gauge.aggregate, found)))
        totals = {m: v for d, m, v in triples if d == ALL_DEVICES}
        if "fb_used_mib" in totals and "fb_free_mib" in totals:
            triples.append((ALL_DEVICES, "fb_used_pct", _share_pct(totals["fb_used_mib"], totals["fb_free_mib"])))
        if per_gpu:
            triples.append((ALL_DEVICES, "gpus", float(len(per_gpu))))
        return triples


def _share_pct(used: float, free: float) -> float:
    return 100.0 * used / (used + free) if used + free > 0 else 0.0


def _device_order(device: str) -> tuple[int, str]:
    head = device.split("/")[0]
    return (int(head), device) if head.isdigit() else (1 << 30, device)


class NodeReader:
    """Host CPU, memory, load and network of a node-exporter page. Counters become rates over the
    interval since the previous good scrape of the URL (none on the first): CPU busy % =
    100 x (1 - idle seconds / all seconds) summed over the CPUs (iowait counts as busy, as in the
    usual `100 - rate(idle)` dashboards); network bytes/s per interface and their sum without `lo`."""

    def __init__(self) -> None:
        self._previous: tuple[float, dict[str, float]] | None = None

    def read(self, families: dict[str, Any], epoch_s: float) -> list[Triple]:
        """(device, metric, value) triples of this scrape; rates need the previous scrape."""
        counters: dict[str, float] = defaultdict(float)
        cpus = set()
        for sample in _samples(families, "node_cpu_seconds_total"):
            cpus.add(sample.labels.get("cpu"))
            counters["cpu_all_s"] += sample.value
            if sample.labels.get("mode") == "idle":
                counters["cpu_idle_s"] += sample.value
        for direction in ("receive", "transmit"):
            for sample in _samples(families, f"node_network_{direction}_bytes_total"):
                counters[f"{direction}:{sample.labels.get('device', '?')}"] += sample.value
        triples: list[Triple] = []
        if cpus:
            triples.append((ALL_DEVICES, "cpus", float(len(cpus))))
        gauges = {name: _samples(families, name) for name in
                  ("node_memory_MemTotal_bytes", "node_memory_MemAvailable_bytes", "node_load1")}  # fmt: skip
        total = gauges["node_memory_MemTotal_bytes"]
        available = gauges["node_memory_MemAvailable_bytes"]
        if total and available and total[0].value > 0:
            triples += [
                (ALL_DEVICES, "mem_total_bytes", total[0].value),
                (ALL_DEVICES, "mem_available_bytes", available[0].value),
                (ALL_DEVICES, "mem_used_pct", 100.0 * (1.0 - available[0].value / total[0].value)),
            ]
        if gauges["node_load1"]:
            triples.append((ALL_DEVICES, "load1", gauges["node_load1"][0].value))
        triples += self._rates(epoch_s, dict(counters))
        return triples

    def _rates(self, epoch_s: float, counters: dict[str, float]) -> list[Triple]:
        """CPU busy % and network bytes/s since the previous scrape (none when a counter went back)."""
        previous, self._previous = self._previous, (epoch_s, counters)
        if previous is None or epoch_s <= previous[0]:
            return []
        before, dt_s = previous[1], epoch_s - previous[0]
        delta = {k: v - before[k] for k, v in counters.items() if k in before and v >= before[k]}
        triples: list[Triple] = []
        if "cpu_idle_s" in counters and "cpu_idle_s" in before:
            busy_s, idle_s = cpu_seconds(before, counters)
            if busy_s + idle_s > 0:
                triples.append((ALL_DEVICES, "cpu_busy_pct", 100.0 * busy_s / (busy_s + idle_s)))
        for direction, metric in (("receive", "net_rx_bytes_per_s"), ("transmit", "net_tx_bytes_per_s")):
            per_device = {k.split(":", 1)[1]: v / dt_s for k, v in delta.items() if k.startswith(f"{direction}:")}
            if per_device:
                triples += [(device, metric, rate) for device, rate in sorted(per_device.items())]
                triples.append((ALL_DEVICES, metric, sum(r for d, r in per_device.items() if d != LOOPBACK)))
        return triples


def cpu_seconds(before: dict[str, float], after: dict[str, float]) -> tuple[float, float]:
    """(busy, idle) CPU seconds between two node-exporter counter sets (`cpu_all_s`, `cpu_idle_s`), each at least 0.

    The kernel's idle (and iowait) ticks can step back a little (proc(5)), and with them the sum over all modes;
    node-exporter holds the previous value then. So busy time (every mode but idle) and idle time are each taken
    as never less than before: an interval whose idle stepped back counts no idle time rather than losing its rate.
    """
    busy_s = (after["cpu_all_s"] - after["cpu_idle_s"]) - (before["cpu_all_s"] - before["cpu_idle_s"])
    return max(0.0, busy_s), max(0.0, after["cpu_idle_s"] - before["cpu_idle_s"])


Reader = DcgmReader | NodeReader


def reader(family: str) -> Reader:
    """A fresh reader for telemetry `family` (one per URL: the node reader keeps the last counters)."""
    return DcgmReader() if family == "dcgm" else NodeReader()


POWER_METRIC = "power_w"
"""The metric whose `all` value (the sum over the GPUs of one scrape) is kept with its time for the energy."""
PowerSamples = tuple[tuple[float, float], ...]
"""(epoch seconds of the scrape, watts) of one telemetry URL, in scrape order."""


class TelemetrySeries:
    """One telemetry URL's reader, every value it gave, for summary.json, and its timed power samples."""

    def __init__(self, family: str) -> None:
        self.family = family
        self.reader = reader(family)
        self.values: dict[tuple[str, str], list[float]] = defaultdict(list)
        self.power: list[tuple[float, float]] = []

    def read(self, families: dict[str, Any], epoch_s: float) -> list[Triple]:
        """This scrape's triples (kept for the summary; the GPUs' total power also with `epoch_s`)."""
        triples = self.reader.read(families, epoch_s)
        for device, metric, value in triples:
            self.values[(device, metric)].append(value)
            if device == ALL_DEVICES and metric == POWER_METRIC:
                self.power.append((epoch_s, value))
        return triples

    def summary(self) -> dict[str, Any]:
        """The devices seen; per aggregate metric its `mean`, `p50` and `max` over the scrapes;
        per device and metric its `mean` and `max` (units in the metric names)."""
        devices = sorted({d for d, _ in self.values if d != ALL_DEVICES}, key=_device_order)
        per_device: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
        for (device, metric), values in self.values.items():
            if device != ALL_DEVICES:
                per_device[device][metric] = {"mean": _round(np.mean(values)), "max": _round(max(values))}
        return {
            "devices": devices,
            ALL_DEVICES: {
                metric: {"mean": _round(np.mean(v)), "p50": _round(np.median(v)), "max": _round(max(v))}
                for (device, metric), v in self.values.items()
                if device == ALL_DEVICES
            },
            "per_device": {device: per_device[device] for device in devices},
        }


def _round(value: Any) -> float:
    return round(float(value), 4)
