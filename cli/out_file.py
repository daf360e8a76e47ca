"""The file a command was asked to write (``--out``): written whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path

from evalledger.cli.errors import UsageError


def write_out(path: str | os.PathLike[str], data: bytes, what: str = "--out") -> None:
    """Write ``data`` to ``path`` through a hidden temporary file beside it, synced to the disk and
    renamed over it, so a command that fails or is killed leaves what ``path`` held before, never
    half a file. A path that cannot be written (a folder, a missing folder, no permission) is a
    UsageError naming it and ``what`` gave it."""
    out = Path(path)
    if out.is_dir():
        raise UsageError(f"{what} {out}: is a folder; name a file")
    tmp = out.with_name(f".{out.name}.{os.getpid()}.partial")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, out)
    except OSError as exc:
        raise UsageError(f"{what} {out}: cannot write ({exc.strerror or exc})") from None
    finally:
        tmp.unlink(missing_ok=True)
