"""A scriptable OpenAI-compatible chat-completions stand-in, for tests and for trying the openai
backend offline. It listens on 127.0.0.1 only.

    stand_in = StandIn(delay=0.05)                # every reply waits 50 ms
    base_url = await stand_in.start()             # "http://127.0.0.1:PORT/v1"
    stand_in.script(Reply({"score": 4}, fenced=True), Status(429, retry_after=1), Drop(), Slow(5),
                    Reply('{"score": 4', finish_reason="length"), Raw(b'\xff\xfe not UTF-8'))
    ...
    await stand_in.stop()

Scripted behaviours are served first, in order; after them every request gets the default
reply: ``reply_fn(body)`` when given, else the smallest JSON instance of the request's schema
(plumbing only: it is not a judge). ``schema_instance_reply(seed)`` is a reply_fn answering an
arbitrary instance of the schema instead: the behaviour of any grammar-constrained model. The
schema is read from whichever response-format mode the request used (``requested_schema``).
``refuse_formats={"json_schema": 500}`` refuses a mode with that status and a body naming it,
after the usual delay (so calls are in flight when the refusals land). ``rate_limit_every=N``
answers every Nth unscripted request 429 at once (with ``rate_limit_retry_after``). ``StandInThread`` runs one in a
background thread for synchronous code; ``python -m evalledger.testing.stand_in --port N`` serves one.
Every request body and whether it carried an Authorization header are kept in ``requests``;
``in_flight`` and ``max_in_flight`` count the requests being answered now and the most at once
(``GET /stand-in/stats`` gives them to another process; ``?reset=1`` restarts the peak).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import random
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from aiohttp import web

from evalledger.testing.schema_instances import random_instance

PROMPT_SCHEMA_NOTE = "conforms to this JSON schema:\n"


@dataclass
class Reply:
    """A 200 completion whose content is ``content`` (a dict is JSON-encoded), maybe fenced."""

    content: Any
    fenced: bool = False
    prose: str = ""          # text put before the JSON ("Sure! Here it is:")
    delay: float | None = None
    finish_reason: str = "stop"   # "length": the reply was cut off at max_tokens


@dataclass
class Status:
    """An HTTP error status (429, 500, 400 ...) with an optional Retry-After and body."""

    status: int
    retry_after: float | str | None = None
    body: str = '{"error": {"message": "stand-in error"}}'
    delay: float | None = None
    headers: dict[str, str] = field(default_factory=dict)   # more headers: a redirect's Location, say


@dataclass
class Raw:
    """A response body sent byte for byte (invalid UTF-8, NaN, huge); ``chunked`` sends it in
    64 KiB pieces without a Content-Length, so a client cannot tell its size up front."""

    body: bytes
    status: int = 200
    chunked: bool = False
    delay: float | None = None


@dataclass
class Drop:
    """Close the connection without answering."""

    delay: float | None = None


@dataclass
class Slow:
    """Answer (with the default reply) only after ``seconds``: longer than a client's timeout."""

    seconds: float


Behaviour = Reply | Status | Raw | Drop | Slow
_NOT_KEPT: dict[str, Any] = {"body": None, "authorized": None}   # a request counted, not kept (keep_requests=False)


def minimal_instance(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """The smallest JSON value valid for a (pydantic-made) JSON schema."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return minimal_instance(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            options = [o for o in schema[key] if o.get("type") != "null"] or schema[key]
            return minimal_instance(options[0], defs)
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {name: minimal_instance(props[name], defs) for name in schema.get("required", [])}
    if kind == "array":
        return [minimal_instance(schema["items"], defs) for _ in range(schema.get("minItems", 0))]
    return {"string": "stand-in", "integer": schema.get("minimum", 0), "number": schema.get("minimum", 0.0),
            "boolean": True, "null": None}.get(kind, None)


def requested_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The reply schema a request carries: json_schema, json_object's schema, or in the system prompt."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return (fmt.get("json_schema") or {}).get("schema")
    if fmt.get("type") == "json_object":
        return fmt.get("schema")
    for message in body.get("messages", []):
        content = str(message.get("content", ""))
        if message.get("role") == "system" and PROMPT_SCHEMA_NOTE in content:
            try:
                return json.loads(content.split(PROMPT_SCHEMA_NOTE, 1)[1])
            except ValueError:
                return None
    return None


def format_mode(body: dict[str, Any]) -> str:
    """The response-format mode of a request: json_schema, json_object or prompt."""
    return (body.get("response_format") or {}).get("type") or "prompt"


def default_reply(body: dict[str, Any]) -> Any:
    """The smallest instance of the request's schema, else an empty object."""
    schema = requested_schema(body)
    return minimal_instance(schema) if schema else {}


def schema_instance_reply(seed: int = 0) -> Callable[[dict[str, Any]], Any]:
    """A reply_fn answering an arbitrary (seeded) instance of each request's schema."""
    rng = random.Random(seed)

    def reply(body: dict[str, Any]) -> Any:
        schema = requested_schema(body)
        return random_instance(schema, rng) if schema else {}

    return reply


@dataclass
class StandIn:
    """The server: a queue of scripted behaviours, a default reply, a delay per reply."""

    delay: float = 0.0
    reply_fn: Callable[[dict[str, Any]], Any] | None = None
    reject_response_format: bool = False
    refuse_formats: dict[str, int] = field(default_factory=dict)   # mode -> HTTP status refusing it
    requests: list[dict[str, Any]] = field(default_factory=list)
    _queue: collections.deque = field(default_factory=collections.deque)
    _runner: web.AppRunner | None = None
    port: int | None = None
    in_flight: int = 0           # requests being answered now
    max_in_flight: int = 0       # the most answered at once
    rate_limit_every: int | None = None   # every Nth request (unscripted) gets a 429 at once
    rate_limit_retry_after: float | None = None   # the Retry-After of those 429s
    # End a request's handler when its client goes away (a killed worker), so in_flight counts
    # only requests someone still waits for; by default a handler runs to its end regardless.
    cancel_on_disconnect: bool = False
    # False: ``requests`` counts the requests but keeps no body (a benchmark's server answering
    # thousands of calls would otherwise hold every prompt, and grow slower as it does).
    keep_requests: bool = True

    def script(self, *behaviours: Behaviour) -> "StandIn":
        """Queue behaviours for the next requests, in order."""
        self._queue.extend(behaviours)
        return self

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self, port: int = 0) -> str:
        """Listen on 127.0.0.1 (port 0: any free one); returns the base URL ending in /v1."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/chat/completions", self._handle)
        app.router.add_get("/stand-in/stats", self._stats)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.2,
                                     handler_cancellation=self.cancel_on_disconnect)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self.base_url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._answer(request)
        finally:
            self.in_flight -= 1

    async def _stats(self, request: web.Request) -> web.Response:
        """What a client in another process cannot see: requests answered and the most at once;
        ``?reset=1`` starts the peak again (a benchmark measures each round on its own)."""
        stats = {"requests": len(self.requests), "in_flight": self.in_flight, "max_in_flight": self.max_in_flight}
        if request.query.get("reset"):
            self.max_in_flight = self.in_flight
        return web.json_response(stats)

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append({"body": body, "authorized": "Authorization" in request.headers}
                             if self.keep_requests else _NOT_KEPT)
        if self.reject_response_format and "response_format" in body:
            return web.json_response({"error": {"message": "response_format json_schema is not supported "
                                                           "by this server"}}, status=400)
        refusal = self.refuse_formats.get(format_mode(body))
        if refusal is not None:
            await asyncio.sleep(self.delay)
            return web.json_response({"error": {"message": f"response_format type {format_mode(body)} is not "
                                                           "supported: unsupported schema"}}, status=refusal)
        behaviour = self._queue.popleft() if self._queue else None
        if behaviour is None and self.rate_limit_every and len(self.requests) % self.rate_limit_every == 0:
            # decided on arrival, answered at once (a rate limiter does no model work)
            behaviour = Status(429, retry_after=self.rate_limit_retry_after, delay=0.0)
        wait = getattr(behaviour, "delay", None)
        if isinstance(behaviour, Slow):
            wait = behaviour.seconds
        if wait is None:
            wait = self.delay
        if wait:
            await asyncio.sleep(wait)
        if isinstance(behaviour, Drop):
            request.transport.abort()  # type: ignore[union-attr]
            return web.Response(status=500)
        if isinstance(behaviour, Raw):
            return await self._raw(request, behaviour)
        if isinstance(behaviour, Status):
            headers = {"Retry-After": str(behaviour.retry_after)} if behaviour.retry_after is not None else {}
            headers.update(behaviour.headers)
            return web.Response(status=behaviour.status, text=behaviour.body, headers=headers,
                                content_type="application/json")
        if isinstance(behaviour, Reply):
            return self._completion(body, behaviour.content, behaviour.fenced, behaviour.prose,
                                    behaviour.finish_reason)
        return self._completion(body, (self.reply_fn or default_reply)(body), False, "")

    async def _raw(self, request: web.Request, raw: Raw) -> web.StreamResponse:
        """Send ``raw.body`` as it is, whole or in chunks without a Content-Length."""
        if not raw.chunked:
            return web.Response(status=raw.status, body=raw.body, content_type="application/json")
        response = web.StreamResponse(status=raw.status, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            for start in range(0, len(raw.body), 64 * 1024):
                await response.write(raw.body[start:start + 64 * 1024])
            await response.write_eof()
        except (ConnectionError, RuntimeError):
            pass   # the client stopped reading (as it should past its cap)
        return response

    def _completion(self, body: dict[str, Any], content: Any, fenced: bool, prose: str,
                    finish_reason: str = "stop") -> web.Response:
        return web.json_response(completion(body, content, f"standin-{len(self.requests)}", fenced, prose,
                                            finish_reason))


def completion(body: dict[str, Any], content: Any, reply_id: str = "standin", fenced: bool = False,
               prose: str = "", finish_reason: str = "stop") -> dict[str, Any]:
    """The chat completion answering request ``body`` with ``content`` (a dict is JSON-encoded),
    maybe fenced or after prose; usage counts words, as a stand-in for tokens."""
    text = content if isinstance(content, str) else json.dumps(content)
    if fenced:
        text = f"```json\n{text}\n```"
    if prose:
        text = f"{prose}\n{text}"
    prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
    words = len(text.split())
    return {
        "id": reply_id, "object": "chat.completion", "model": body.get("model"),
        "choices": [{"index": 0, "finish_reason": finish_reason,
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": words, "total_tokens": prompt + words},
    }


class StandInThread:
    """A StandIn served from a background thread (its own event loop), as a context manager."""

    def __init__(self, stand_in: StandIn | None = None, port: int = 0):
        self.stand_in = stand_in or StandIn()
        self._port = port
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="stand-in", daemon=True)

    def __enter__(self) -> StandIn:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.stand_in.start(self._port), self._loop).result(10)
        return self.stand_in

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self.stand_in.stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


def main(argv: list[str] | None = None) -> int:
    """Serve a stand-in until interrupted: ``python -m evalledger.testing.stand_in --port 8099``."""
    parser = argparse.ArgumentParser(description="A stand-in OpenAI-compatible chat-completions server "
                                                 "(127.0.0.1 only); replies are the smallest instance of "
                                                 "the requested schema.")
    parser.add_argument("--port", type=int, default=8099)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds each reply waits")
    parser.add_argument("--reject-response-format", action="store_true")
    parser.add_argument("--schema-instances", type=int, default=None, metavar="SEED",
                        help="answer arbitrary instances of each request's schema (seeded), as a "
                             "grammar-constrained model may")
    parser.add_argument("--refuse-format", action="append", default=[], metavar="MODE=STATUS",
                        help="refuse a response-format mode with an HTTP status: json_schema=500 "
                             "behaves like llama-cpp-python's server")
    parser.add_argument("--rate-limit-every", type=int, default=None, metavar="N",
                        help="answer every Nth request with 429 (10: a tenth of them)")
    parser.add_argument("--retry-after", type=float, default=None, metavar="S",
                        help="the Retry-After those 429s carry")
    parser.add_argument("--forget-requests", action="store_true",
                        help="keep no request bodies, only their count (a long benchmark's server stays as fast)")
    args = parser.parse_args(argv)
    try:
        refusals = {mode: int(status) for mode, status in (item.split("=", 1) for item in args.refuse_format)}
    except ValueError:
        parser.error("--refuse-format takes MODE=STATUS, e.g. json_schema=500")
    reply_fn = schema_instance_reply(args.schema_instances) if args.schema_instances is not None else None

    async def serve() -> None:
        stand_in = StandIn(delay=args.delay, reject_response_format=args.reject_response_format,
                           refuse_formats=refusals, reply_fn=reply_fn,
                           rate_limit_every=args.rate_limit_every, rate_limit_retry_after=args.retry_after,
                           keep_requests=not args.forget_requests)
        url = await stand_in.start(args.port)
        print(f"stand-in chat completions at {url} (OPENAI_BASE_URL={url})", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await stand_in.stop()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
