"""The view command: serve a home's local web viewer, or export it as a static site (cli/viewer/)."""

from __future__ import annotations

import asyncio
import math
import secrets
import sys
import webbrowser
from pathlib import Path

from evalledger.cli.errors import UsageError
from evalledger.cli.ledger_commands import home_of


def _queue(path: str | None) -> list[str] | None:
    """The case ids of the ``--queue`` file, refused with a usage error naming the line when unreadable."""
    if path is None:
        return None
    from evalledger.projections.review_queue import QueueFileError, read_queue
    try:
        return read_queue(path, Path(path).read_bytes())
    except OSError as exc:
        raise UsageError(f"--queue {path}: {exc.strerror or exc}") from None
    except QueueFileError as exc:
        raise UsageError(f"--queue {exc}") from None


def cmd_view(args) -> int:
    """Serve the viewer until interrupted (or write the static site with --export)."""
    from evalledger.cli.viewer import export_site, make_app
    from evalledger.cli.viewer.server import CONFIG_KEY, LOOPBACK, host_values, serve
    home = home_of(args)
    if args.export:
        count = export_site(home, args.export, args.compare)
        print(f"wrote {count} pages to {args.export} (open {args.export}/index.html)")
        return 0
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: not a port number (0-65535)")
    if not 0 < args.keepalive_timeout < math.inf:       # 0 would keep idle connections for ever
        raise UsageError(f"--keepalive-timeout {args.keepalive_timeout}: not a number of seconds above 0")
    allowed = args.allow_host or []
    host_values(args.host, 0, allowed)         # a NAME that is no host name is refused before the start
    token = secrets.token_urlsafe(24)
    app = make_app(home, review=args.review, compare=args.compare, token=token, queue=_queue(args.queue))

    def ready(port: int) -> None:
        app[CONFIG_KEY]["hosts"] = host_values(args.host, port, allowed)
        # the URL names the first allowed name: a wildcard address (0.0.0.0) is no name to browse to
        named = allowed[0] if allowed and args.host not in LOOPBACK else args.host
        shown = f"[{named}]" if ":" in named else named
        url = f"http://{shown}:{port}/" + (f"?token={token}" if args.review else "")
        mode = "review mode: overrides and notes are written to the ledger" if args.review else "read-only"
        print(f"evalledger view: serving {home} at {url} ({mode}); Ctrl-C stops", flush=True)
        if args.host not in LOOPBACK:
            names = (f"; Host names answered: {', '.join(sorted(allowed))} and the loopback names" if allowed else
                     "; any Host name is answered (--allow-host NAME keeps the check on)")
            print(f"warning: listening on {args.host}: anyone who can reach it can read this ledger{names}",
                  file=sys.stderr, flush=True)
        if args.open:
            webbrowser.open(url)
    try:
        asyncio.run(serve(app, args.host, args.port, ready, keepalive_timeout=args.keepalive_timeout))
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    except KeyboardInterrupt:
        print("evalledger view: stopped", file=sys.stderr)
    return 0
