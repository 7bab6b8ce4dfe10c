"""Kernel receive times of socket reads (`SO_TIMESTAMPNS`), on `time.perf_counter`'s clock.

Gevent-free, so that both the client (`byte_arrival`, `pump`) and the simulator can use it: a read
done with `recvmsg(..., CMSG_BYTES)` on a socket with `SO_TIMESTAMPNS` set carries the time the
kernel received its (last) TCP segment, however late the process gets round to the read.
"""

from __future__ import annotations

import socket
import struct
import sys
import time
from time import perf_counter
from typing import Any

_PLAUSIBLE_AGE_S = 60.0  # a kernel receive time older than this (or in the future) is not trusted
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux: SO_TIMESTAMPNS == SCM_TIMESTAMPNS == 35
_TIMESPEC = struct.Struct("@qq")  # struct timespec: seconds, nanoseconds
CMSG_BYTES = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0
KERNEL_TIMESTAMPS = sys.platform.startswith("linux") and CMSG_BYTES > 0
"""True where arrival times can come from the kernel (plain-TCP connections on Linux)."""

BRACKET_S = 20e-6
"""A reading of the wall clock between two of perf_counter's this far apart or more was interrupted (the scheduler
paused the process: up to a tick, 4 ms) and is read again."""


def wall_minus_perf_s() -> float:
    """`time.time()` − `perf_counter()` now: the wall clock read between two perf_counter readings, read again when
    they are `BRACKET_S` apart or more (`time.time() - now` with `now` read before would take a pause of the process
    in between for an offset: a receive time that many ms early)."""
    before = perf_counter()
    wall_s = time.time()
    after = perf_counter()
    if after - before >= BRACKET_S:
        before = perf_counter()
        wall_s = time.time()
        after = perf_counter()
    return wall_s - (before + after) / 2


def kernel_arrival(ancillary: list[tuple[int, int, bytes]], now: float) -> float:
    """The kernel's receive time (`SO_TIMESTAMPNS`) in `ancillary` (from `recvmsg`), on
    perf_counter's clock; `now` (perf_counter s, just after the read) when it holds none or an
    implausible one (the wall clock stepped)."""
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(payload) >= _TIMESPEC.size:
            seconds, nanoseconds = _TIMESPEC.unpack_from(payload)
            arrived = seconds + nanoseconds * 1e-9 - wall_minus_perf_s()  # CLOCK_REALTIME -> perf_counter's clock
            if 0.0 <= now - arrived < _PLAUSIBLE_AGE_S:
                return arrived
    return now


_TCP_INFO_RTT = struct.Struct("@I")  # struct tcp_info's tcpi_rtt (µs): 8 bytes of u8 fields, then 15 u32 before it
_TCP_INFO_RTT_OFFSET = 68


def connect_rtt_s(sock: Any) -> float | None:
    """The kernel's round-trip time of the TCP handshake of `sock`, just connected (SYN to SYN-ACK: `tcpi_rtt`, whose
    first sample it is), seconds; None where the kernel does not say (not Linux)."""
    if not KERNEL_TIMESTAMPS:
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    except (OSError, AttributeError):
        return None
    if len(info) < _TCP_INFO_RTT_OFFSET + _TCP_INFO_RTT.size:
        return None
    return _TCP_INFO_RTT.unpack_from(info, _TCP_INFO_RTT_OFFSET)[0] * 1e-6


class StampedRecv:
    """Mixin for a socket class (stdlib or gevent): its `recv` and `recv_into` also keep the
    kernel's receive time of what they read, `t_arrival_s` (perf_counter s; the time of the call
    where the kernel gave none). For code that reads with them — asyncio's transports (`recv`, and
    `recv_into` under TLS, whose records are decrypted right after the read), geventhttpclient's
    header read — on a socket with `SO_TIMESTAMPNS` set. The class using it declares the slot."""

    __slots__ = ()

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data, ancillary, _flags, _address = self.recvmsg(bufsize, CMSG_BYTES, flags)  # type: ignore[attr-defined]
        self.t_arrival_s = kernel_arrival(ancillary, perf_counter())
        return data

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        view = memoryview(buffer)
        size, ancillary, _flags, _address = self.recvmsg_into(  # type: ignore[attr-defined]
            [view[:nbytes] if nbytes else view], CMSG_BYTES, flags
        )
        self.t_arrival_s = kernel_arrival(ancillary, perf_counter())
        return size
