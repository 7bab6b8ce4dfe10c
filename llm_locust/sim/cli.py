"""`llm-locust sim`: run the built-in OpenAI-compatible simulator until SIGTERM / SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import ssl
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from llm_locust.sim.arguments import add_arguments, config_from_args, config_problem
from llm_locust.sim.config import SimConfig
from llm_locust.sim.server import serve


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `sim` sub-command to `subparsers` and return its parser."""
    parser = add_arguments(subparsers)
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run the simulator until SIGTERM / SIGINT; return the exit code (0)."""
    try:
        config = config_from_args(args)
    except OSError as e:
        print(f"llm-locust sim: error: --sigv4 @FILE: cannot read {e.filename} ({e.strerror})", file=sys.stderr)
        return 2
    problem = config_problem(config)
    if problem is not None:
        print(f"llm-locust sim: error: {problem}", file=sys.stderr)
        return 2
    try:
        tls = server_context(config.tls_cert, config.tls_key)
    except ValueError as e:
        print(f"llm-locust sim: error: {e}", file=sys.stderr)
        return 2
    # the standard event loop, not uvloop: its transports read with the socket's `recv`, which
    # `StampedSocket` turns into a read with the kernel's receive time (uvloop reads in C; same
    # CPU per token event here, benchmarks/RESULTS.md)
    asyncio.run(_main(config, args.ready_file, tls))
    return 0


def server_context(cert: str, key: str) -> ssl.SSLContext | None:
    """The HTTPS context of --tls-cert / --tls-key (None: plain HTTP); ValueError naming the problem."""
    if not cert and not key:
        return None
    if not (cert and key):
        raise ValueError("--tls-cert and --tls-key go together: give both")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except FileNotFoundError as e:
        raise ValueError(f"--tls-cert / --tls-key: no such file: {e.filename}") from None
    except (ssl.SSLError, OSError) as e:
        raise ValueError(f"--tls-cert {cert} / --tls-key {key}: not a PEM certificate and its key ({e})") from None
    return context


async def _main(config: SimConfig, ready_file: Path | None, tls: ssl.SSLContext | None) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signum, stop.set)

    ports: dict[int, int] = {}  # replica index -> its port

    def on_listening(index: int, port: int) -> None:
        print(
            f"llm-locust sim listening on {'https' if tls else 'http'}://{config.host}:{port} "
            f"(model {','.join(config.served)}, timing {config.timing})",
            flush=True,
        )
        ports[index] = port
        if ready_file is not None and len(ports) == config.replicas:  # every replica listens: their ports in order
            unfinished = ready_file.with_name(ready_file.name + ".tmp")
            unfinished.write_text("".join(f"{ports[i]}\n" for i in range(config.replicas)))
            os.replace(unfinished, ready_file)

    await asyncio.gather(
        *(
            serve(replace(config, port=config.port + i if config.port else 0), stop, partial(on_listening, i), tls)
            for i in range(config.replicas)
        )
    )
    sys.stdout.flush()
