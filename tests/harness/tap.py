"""A TCP relay on 127.0.0.1 that keeps every byte a server sent back, per connection: the truth of what reached
the client, for servers that keep no trace of their own (llama.cpp). It relays in threads (greenlets where gevent
patched threading, as importing Locust does) while the test waits on a `locust` subprocess."""

from __future__ import annotations

import socket
import threading
from typing import Self
from urllib.parse import urlsplit


class Tap:
    """Relays 127.0.0.1:<port> to `target_url`'s host and port while in its `with` block; `url` is the target's URL
    with the tap's address, `received` the bytes the server sent on each connection, in the order they opened."""

    def __init__(self, target_url: str) -> None:
        parts = urlsplit(target_url)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"{parts.scheme}://127.0.0.1:{self._listener.getsockname()[1]}{parts.path}"
        self._received: list[bytearray] = []

    def __enter__(self) -> Self:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._listener.close()

    @property
    def received(self) -> list[bytes]:
        return [bytes(data) for data in self._received]

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed on exit
                return
            server = socket.create_connection(self._target)
            kept = bytearray()
            self._received.append(kept)
            threading.Thread(target=pipe, args=(client, server), daemon=True).start()
            threading.Thread(target=pipe, args=(server, client, kept), daemon=True).start()


def pipe(source: socket.socket, sink: socket.socket, kept: bytearray | None = None) -> None:
    """Copy `source` to `sink` (and into `kept`) until `source` ends, then end `sink`'s writing; a thread's or a
    greenlet's sockets alike."""
    try:
        while data := source.recv(65536):
            if kept is not None:
                kept += data
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)
    except OSError:  # the other side closed first
        pass
