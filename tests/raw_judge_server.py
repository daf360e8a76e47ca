"""A chat-completions server on 127.0.0.1 written on raw asyncio streams, for the answers aiohttp's
own server will not send: a bad status line, an invalid header, broken chunked encoding, a
status outside 100-599.

    def garble_first(body: bytes, seen: int) -> bytes | None:
        return b"HTTP/1.1 OK\\r\\n\\r\\n" if seen == 1 else None      # each request's first answer only

    with RawJudgeServer(garble_first) as server:
        ... OPENAI_BASE_URL=server.base_url ...

``answer(body, seen)`` is asked for every request, ``seen`` being how many times this very body
arrived (1 the first time; a retry sends the same body): raw bytes are written as they are and the
connection closed; None answers a completion of ``reply_fn(request)`` (by default an arbitrary
instance of the request's schema, as a grammar-constrained model may send). Requests
on one connection are served in turn (keep-alive), as aiohttp's client sends them. ``unasked``,
when given, is written 50 ms after the first completion on the same connection: an answer to no
request, which a client must not take for the answer to its next one.
"""

from __future__ import annotations

import asyncio
import collections
import json
import threading
from typing import Any, Callable

from evalledger.testing.stand_in import completion, schema_instance_reply

Answer = Callable[[bytes, int], "bytes | None"]


class RawJudgeServer:
    """Serves ``answer`` from a background thread's event loop, as a context manager."""

    def __init__(self, answer: Answer, reply_fn: Callable[[dict[str, Any]], Any] | None = None,
                 unasked: bytes | None = None):
        self.answer = answer
        self.unasked = unasked
        self.reply_fn = reply_fn or schema_instance_reply(1)
        self.seen: collections.Counter[bytes] = collections.Counter()
        self.requests = 0
        self.garbled = 0
        self.port: int | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="raw-judge-server", daemon=True)
        self._server: asyncio.AbstractServer | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> "RawJudgeServer":
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer the requests of one connection until the client closes it or an answer is garbled."""
        try:
            while (body := await _read_request(reader)) is not None:
                self.requests += 1
                self.seen[body] += 1
                raw = self.answer(body, self.seen[body])
                if raw is not None:
                    self.garbled += 1
                    writer.write(raw)
                    await writer.drain()
                    return
                writer.write(self._completion(body))
                await writer.drain()
                if self.unasked is not None and self.requests == 1:
                    await asyncio.sleep(0.05)   # the client has read its answer and pooled the connection
                    writer.write(self.unasked)
                    await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass   # the client went away: nothing to answer
        finally:
            writer.close()

    def _completion(self, body: bytes) -> bytes:
        """A 200 answering the request ``body`` with a completion of ``reply_fn``, keeping the connection open."""
        request = json.loads(body)
        return completion_bytes(request, self.reply_fn(request))


def completion_bytes(request: dict[str, Any], content: Any) -> bytes:
    """A whole HTTP 200 answering ``request`` with a chat completion of ``content``."""
    payload = json.dumps(completion(request, content)).encode()
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % len(payload) + payload)


async def _read_request(reader: asyncio.StreamReader) -> bytes | None:
    """The body of the next request on the connection (None once the client closed it)."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return await reader.readexactly(length)
