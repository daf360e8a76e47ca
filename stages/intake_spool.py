"""The names of intake's temporary files (a large file's spool, a benchmark's spill folder), and
the removal of those a killed ingest left behind.

Each name carries the id of the process that made it: a ``kill -9`` mid-ingest leaves its spool
(up to the size limit, 50 MB by default) and spill folder in ``processed/``, and the next ingest
removes those whose process is gone, never those of an ingest still running beside it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

SPOOL = ".spool-"
SPILL = ".spill-"


def prefix(kind: str) -> str:
    """The name prefix of a temporary file of ``kind`` (SPOOL or SPILL) made by this process."""
    return f"{kind}{os.getpid()}-"


def remove_leftovers(folder: Path) -> None:
    """Remove the spools and spill folders in ``folder`` whose process no longer runs."""
    try:
        entries = list(folder.iterdir())
    except OSError:   # no folder yet (nothing spooled there), or unreadable: nothing to remove
        return
    for entry in entries:
        owner = _owner(entry.name)
        if owner is not None and not _running(owner):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


def _owner(name: str) -> int | None:
    """The process id in a temporary file's name; None for any other name."""
    for kind in (SPOOL, SPILL):
        if name.startswith(kind):
            pid = name[len(kind):].split("-", 1)[0]
            return int(pid) if pid.isdigit() else None
    return None


def _running(pid: int) -> bool:
    """True when process ``pid`` exists (another user's process counts: it is not ours to judge)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
