"""``evalledger view``: a local web viewer of a home (overview, case table, case pages, compare,
live updates, review), and its static export.

    make_app(home, review=False, compare=None) -> aiohttp.web.Application
    export_site(home, out_dir, compare=None) -> int        # pages written

Pages are rendered on the server from the read models and the ledger (never from a judge); the
only script is the packaged ``static/view.js`` (live updates). See docs/view.md.
"""

from evalledger.cli.viewer.export import export_site
from evalledger.cli.viewer.server import CSP, make_app

__all__ = ["CSP", "export_site", "make_app"]
