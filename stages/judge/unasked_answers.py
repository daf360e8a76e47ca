"""Never take an answer the server sent before the request went out.

A broken server or proxy may send a second answer to one request (or a 408 as it drops an idle
connection) after the client has read the first and pooled the connection. aiohttp keeps those
bytes in the idle connection's buffer and hands them to the next request sent on it as its
answer: a reply to another prompt (another case's verdict) recorded as this one's, and every
later answer on that connection one behind. ``CheckedRequest``, the session's request class,
refuses such a connection before writing the request: it is dropped (not pooled again) and the
attempt fails as a dropped connection does, so it is retried on another.
"""

from __future__ import annotations

import aiohttp


class UnaskedAnswer(aiohttp.ClientConnectionError):
    """The pooled connection held an answer before the request was sent on it."""


class CheckedRequest(aiohttp.ClientRequest):
    """A request that is not sent on a connection already holding an answer."""

    async def send(self, conn):   # aiohttp.connector.Connection -> aiohttp.ClientResponse
        """Refuse ``conn`` when bytes wait in it (aiohttp closes it on the raise), else send as usual."""
        protocol = conn.protocol
        # should_close is true when parsed answers or unparsed bytes wait in the protocol's
        # buffer; a connection just taken from the pool has none unless the server sent them unasked
        if protocol is not None and getattr(protocol, "should_close", False):
            raise UnaskedAnswer("the server sent an answer on a pooled connection before its request was "
                                "sent (an answer to no request); the connection was dropped")
        return await super().send(conn)
