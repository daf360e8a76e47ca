"""Files named on the command line that are read whole (a proof bundle, a key, a report, a
checkpoints file): they must be regular files, since reading a device such as /dev/zero or a FIFO
no one writes to never ends."""

from __future__ import annotations

import os
import stat

from evalledger.cli.errors import UsageError


def regular_file(path: str) -> str:
    """``path`` when it names a regular file (through symlinks); else a UsageError naming it and
    why (missing, a folder, a device or FIFO). Returns ``path`` so it reads inline."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise UsageError(f"{path}: is a folder, not a file")
    if not stat.S_ISREG(mode):
        raise UsageError(f"{path}: not a regular file (a device, FIFO or socket cannot be read whole)")
    return path
