"""The file a command was asked to write (``--out``): written whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path

from evalledger.cli.errors import UsageError
from evalledger.ledger.persistence import is_disk_full
from evalledger.ledger.whole_files import write_whole


def write_out(path: str | os.PathLike[str], data: bytes, what: str = "--out") -> None:
    """Write ``data`` to ``path`` whole or not at all (``ledger.whole_files``: a command that fails
    or is killed leaves what ``path`` held before, never half a file). A path that cannot be
    written (a folder, a missing folder, no permission) is a UsageError naming it and ``what``
    gave it; a full disk is an OSError naming ``path``, which the command line reports as one
    (exit 1), the earlier content of ``path`` kept."""
    out = Path(path)
    try:
        write_whole(out, data)
    except IsADirectoryError:
        raise UsageError(f"{what} {out}: is a folder; name a file") from None
    except OSError as exc:
        if is_disk_full(exc):   # not a usage error: named, exit 1, free space and run again (cli/main.py)
            raise
        raise UsageError(f"{what} {out}: cannot write ({exc.strerror or exc})") from None
