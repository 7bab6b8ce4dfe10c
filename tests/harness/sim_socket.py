"""A test's WebSocket client of the simulator: a blocking loopback socket, wsproto's framing — what the Realtime APIs'
unit tests drive the simulator's sessions with."""

from __future__ import annotations

import json
import socket
from typing import Any

from wsproto import ConnectionType, WSConnection
from wsproto.events import CloseConnection, Request, TextMessage


class SimSocket:
    """A WebSocket to the simulator on `port` at `target`, its upgrade carrying `key` as bearer token; `handshake`:
    the server's answer (wsproto's `AcceptConnection`, or `RejectConnection` with its status)."""

    def __init__(self, port: int, target: str, key: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.ws = WSConnection(ConnectionType.CLIENT)
        self.pending: list[Any] = []
        headers = [("Authorization", f"Bearer {key}")]
        self.sock.sendall(self.ws.send(Request(host="127.0.0.1", target=target, extra_headers=headers)))
        self.handshake = self.next_event()

    def next_event(self) -> Any:
        """wsproto's next event of the connection (a message, a close, the handshake's answer), read as it comes."""
        while not self.pending:
            data = self.sock.recv(65536)
            self.ws.receive_data(data or None)
            self.pending.extend(self.ws.events())
        return self.pending.pop(0)

    def send_text(self, event: dict[str, Any] | str) -> None:
        """`event` as one text message (a dict as JSON; a str as it is, hostile text included)."""
        text = event if isinstance(event, str) else json.dumps(event)
        self.sock.sendall(self.ws.send(TextMessage(data=text)))

    def event(self) -> dict[str, Any]:
        """The next server event: a whole text message's JSON."""
        event = self.next_event()
        assert isinstance(event, TextMessage) and event.message_finished
        return json.loads(event.data)

    def until(self, kind: str) -> list[dict[str, Any]]:
        """The events up to and including the first of type `kind`."""
        events = [self.event()]
        while events[-1]["type"] != kind:
            events.append(self.event())
        return events

    def close(self) -> None:
        """A close frame, the server's answering one, the socket closed."""
        self.sock.sendall(self.ws.send(CloseConnection(code=1000)))
        assert isinstance(self.next_event(), CloseConnection)
        self.sock.close()
