"""The viewer's aiohttp application: pages, packaged assets, server-sent events, review writes.

Security: every response carries a Content-Security-Policy that allows scripts from the viewer's
own origin only (no inline script, no handler attribute can run); requests must name the host the
server bound, a loopback name or an ``--allow-host`` name (a DNS-rebinding page cannot read it);
writes exist only with ``--review`` and need the per-launch token and, from a browser, the
viewer's own Origin (a refusal comes before the body is read). Assets are served from a fixed
list of packaged files, so no URL reaches a file outside the package or the home.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from importlib import resources
from pathlib import Path
from urllib.parse import quote

from aiohttp import web

from evalledger import ledger
from evalledger.cli.errors import UsageError
from evalledger.cli.viewer import pages
from evalledger.cli.viewer.case_page import case_page
from evalledger.cli.viewer.html import Links
from evalledger.cli.viewer.live import LiveUpdates
from evalledger.cli.viewer.state import HomeUnavailable, HomeView
from evalledger.projections.history import CaseNotFound

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
ASSETS = {"view.css": "text/css", "view.js": "text/javascript", "case.js": "text/javascript"}
VIEW_KEY = web.AppKey("view", HomeView)
CONFIG_KEY = web.AppKey("config", dict)
LIVE_KEY = web.AppKey("live", LiveUpdates)
KEEPALIVE_SECONDS = 15.0     # an idle kept-alive connection is closed after this (``view --keepalive-timeout``)


def asset_bytes(name: str) -> bytes:
    """A packaged static file of the viewer (``view.css``, ``view.js``, ``case.js``)."""
    return resources.files("evalledger.cli.viewer").joinpath("static", name).read_bytes()


@web.middleware
async def guard(request: web.Request, handler):
    """Refuse a Host the server did not bind; add the CSP and no-sniff headers to every answer;
    answer 503 with the reason when the home's ledger cannot be read now (``HomeUnavailable``)."""
    allowed = request.app[CONFIG_KEY]["hosts"]
    if allowed and request.host.lower() not in allowed:     # DNS names are case-insensitive
        return web.Response(status=403, text=f"host {request.host!r} refused: use {sorted(allowed)[0]}")
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        _secure(exc.headers)
        raise
    except HomeUnavailable as exc:     # the ledger changed underneath (gone, damaged): say so, by name
        response = _html(pages.error_page(503, str(exc), _links(request)), 503)
        response.headers["Retry-After"] = "5"
    _secure(response.headers)
    return response


LOOPBACK = ("127.0.0.1", "localhost", "::1")     # names a rebinding page cannot borrow
_HOST_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*")


def host_values(host: str, port: int, allowed: list[str]) -> set[str]:
    """The ``Host`` values a viewer bound to ``host``:``port`` answers, every other refused (a page
    that rebinds its DNS name to this machine sends its own name): the loopback names, the bound
    address and the ``--allow-host`` names. Empty, which turns the check off, for an address other
    than a loopback name with no name allowed: the names it is reached by are not known.
    A name refused as no host name (a port, a path) raises UsageError."""
    for name in allowed:
        if not _HOST_NAME.fullmatch(name):
            raise UsageError(f"--allow-host {name}: not a host name or address (no port, scheme or path: "
                             "the port is --port's)")
    if host not in LOOPBACK and not allowed:
        return set()
    values = set()
    for name in {*LOOPBACK, host, *allowed}:
        shown = f"[{name}]" if ":" in name else name
        values.add(f"{shown}:{port}".lower())
        if port == 80:                    # a browser leaves the default port out of Host
            values.add(shown.lower())
    return values


def _secure(headers) -> None:
    headers["Content-Security-Policy"] = CSP
    headers["X-Content-Type-Options"] = "nosniff"
    headers["Referrer-Policy"] = "same-origin"   # "no-referrer" makes browsers send Origin: null


def _links(request: web.Request) -> Links:
    """Links for this request: carrying the review token when the request had the right one."""
    token = request.app[CONFIG_KEY]["token"]
    given = request.query.get("token")
    return Links(token=token if token and given and secrets.compare_digest(given, token) else None)


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8")


async def overview(request: web.Request) -> web.Response:
    """GET /: the overview."""
    view = request.app[VIEW_KEY]
    with view.reading():   # every request reads one snapshot of the read models (HomeView.reading)
        aggregates, runs = view.overview()
    return _html(pages.overview_page(aggregates, runs, _links(request)))


async def verify(request: web.Request) -> web.Response:
    """GET /verify: recompute the hash chain now."""
    return _html(pages.verify_page(request.app[VIEW_KEY].verify(), _links(request)))


def _int(text: str | None, default: int) -> int:
    """A page number: at least 1; not a number, ``default``. A number too long for ``int`` (over
    4300 digits) is past any end, as 10**400 is: the last page, not the first."""
    text = (text or "").strip()
    if text.isascii() and text.isdigit() and len(text) > 18:
        return 1 << 62
    try:
        return max(1, int(text or default))
    except ValueError:
        return default


async def cases(request: web.Request) -> web.Response:
    """GET /cases: one page of the filtered, sorted case table."""
    view = request.app[VIEW_KEY]
    q = request.query
    filters = {k: q.get(k, "").strip() for k in ("verdict", "benchmark", "model", "q", "changed", "queue")
               if q.get(k)}
    sort, descending, page_no = q.get("sort", "case"), q.get("desc") in ("1", "true"), _int(q.get("page"), 1)
    with view.reading():
        result = view.cases(filters, sort, descending, page_no)
        choices = view.choices()
    links = _links(request)
    if links.token:
        filters["token"] = links.token
    return _html(pages.cases_page(result, filters, sort, descending, choices, links,
                                  compare=bool(view.compare_home), queue=len(view.queue)))


async def case(request: web.Request) -> web.Response:
    """GET /case/{id}: the case page (with review forms in review mode, for a token holder)."""
    view = request.app[VIEW_KEY]
    links = _links(request)
    case_id = request.match_info["case_id"]
    try:
        with view.reading():
            document = view.case_document(case_id)
    except CaseNotFound as exc:
        return _html(pages.error_page(404, str(exc), links), 404)
    review = links.token if request.app[CONFIG_KEY]["review"] else None
    return _html(case_page(case_id, document, links, review))


async def compare_view(request: web.Request) -> web.Response:
    """GET /compare: the comparison with the --compare home."""
    view = request.app[VIEW_KEY]
    with view.reading():
        diff = view.diff()
    if diff is None:
        return _html(pages.no_compare_page(_links(request)))
    return _html(pages.compare_page(diff, view.home, view.compare_home, _links(request)))


async def asset(request: web.Request) -> web.Response:
    """GET /static/{name}: one of the packaged assets, nothing else."""
    name = request.match_info["name"]
    if name not in ASSETS:
        raise web.HTTPNotFound(text=f"no asset {name!r}")
    return web.Response(body=asset_bytes(name), content_type=ASSETS[name])


async def events(request: web.Request) -> web.StreamResponse:
    """GET /events: server-sent events, one ``head`` event each time the ledger head moves."""
    return await request.app[LIVE_KEY].stream(request)


def _check_write(request: web.Request) -> None:
    """Refuse a write before its body is read (a client may announce a huge one and send it slowly,
    or never): 405 without --review, 403 from another Origin."""
    if not request.app[CONFIG_KEY]["review"]:
        raise web.HTTPMethodNotAllowed(request.method, ["GET"], text="the viewer is read-only; start it with --review",
                                       headers={"Connection": "close"})   # the unread body is not waited for
    origin = request.headers.get("Origin")
    if origin is not None and origin != f"{request.scheme}://{request.host}":
        raise web.HTTPForbidden(text=f"cross-site write refused (Origin {origin!r})", headers={"Connection": "close"})


def _check_token(request: web.Request, form) -> None:
    """Refuse (403) a write without the launch token, in its form or its query."""
    token = form.get("token") or request.query.get("token") or ""
    if not secrets.compare_digest(str(token), request.app[CONFIG_KEY]["token"]):
        raise web.HTTPForbidden(text="missing or wrong review token: use the URL printed at start")


def _required(form, name: str) -> str:
    value = str(form.get(name) or "").strip()
    if not value:
        raise web.HTTPBadRequest(text=f"{name} is required")
    return value


async def write(request: web.Request) -> web.Response:
    """POST /case/{id}/override or /case/{id}/note: the same events as ``evalledger override``/``note``."""
    from evalledger.cli.ledger_commands import add_note
    from evalledger.cli.report_commands import record_override
    _check_write(request)
    form = await request.post()
    _check_token(request, form)
    view = request.app[VIEW_KEY]
    case_id, action = request.match_info["case_id"], request.match_info["action"]
    try:
        with view.reading():
            view.case(case_id)
    except CaseNotFound as exc:
        raise web.HTTPNotFound(text=str(exc)) from None
    author = _required(form, "author")
    with ledger.open_ledger(view.home) as led:
        try:
            if action == "override":
                verdict = _required(form, "verdict")
                if verdict not in ("pass", "fail"):
                    raise web.HTTPBadRequest(text=f"verdict must be pass or fail, not {verdict!r}")
                record_override(led, case_id, verdict, _required(form, "reason"), author)
            else:
                add_note(led, f"case:{case_id}", _required(form, "text"), author)
        except UsageError as exc:
            raise web.HTTPBadRequest(text=str(exc)) from None
    view.refresh()
    raise web.HTTPSeeOther(f"/case/{quote(case_id, safe='')}?token={quote(request.app[CONFIG_KEY]['token'])}")


def check_homes(home: str | Path, compare: str | Path | None) -> None:
    """Refuse (usage error) a home or a --compare home that is not there: the viewer creates none."""
    for label, path in (("", home), ("--compare ", compare)):
        if path is not None and not ledger.is_home(path) and not Path(path).is_file():
            raise UsageError(f"{label}{path}: no evalledger home here")


def make_app(home: str | Path, review: bool = False, compare: str | Path | None = None,
             hosts: set[str] | None = None, token: str | None = None, live: bool = True,
             queue: list[str] | None = None) -> web.Application:
    """The viewer of ``home`` as an aiohttp application (``hosts``: the Host values accepted;
    ``queue``: the case ids of a review queue ``sample`` wrote, for the table's queue filter)."""
    check_homes(home, compare)
    app = web.Application(middlewares=[guard])
    view = HomeView(home, compare, queue)
    app[VIEW_KEY] = view
    app[CONFIG_KEY] = {"review": review, "token": token or secrets.token_urlsafe(24), "hosts": hosts or set()}
    app[LIVE_KEY] = LiveUpdates(view, watch=live)
    app.router.add_get("/", overview)
    app.router.add_get("/verify", verify)
    app.router.add_get("/cases", cases)
    app.router.add_get("/case/{case_id}", case)
    app.router.add_get("/compare", compare_view)
    app.router.add_get("/static/{name}", asset)
    app.router.add_get("/events", events)
    app.router.add_post("/case/{case_id}/{action:override|note}", write)
    app.on_startup.append(lambda app: app[LIVE_KEY].start())
    app.on_shutdown.append(lambda app: app[LIVE_KEY].stop())
    app.on_cleanup.append(_close_view)
    return app


async def _close_view(app: web.Application) -> None:
    app[VIEW_KEY].close()


async def serve(app: web.Application, host: str, port: int, ready,
                keepalive_timeout: float = KEEPALIVE_SECONDS) -> None:
    """Run ``app`` on host:port until cancelled; ``ready(actual_port)`` is called once it listens.
    A connection idle for ``keepalive_timeout`` seconds (no request under way) is closed."""
    # aiohttp's own default keeps an idle connection for an hour: every idle client holds a socket
    # and a protocol object of the server that long. A streaming answer (/events) is not idle.
    runner = web.AppRunner(app, handle_signals=False, access_log=None, keepalive_timeout=keepalive_timeout)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    actual = site._server.sockets[0].getsockname()[1]
    ready(actual)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
