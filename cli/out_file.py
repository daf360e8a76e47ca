"""Where a command's output goes: the file it was asked to write (``--out``), written whole or not
at all, or standard output, whose failure is said as such."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from evalledger.cli.errors import UsageError
from evalledger.ledger.persistence import DiskFull, is_disk_full
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


@contextmanager
def stdout_bytes(what: str) -> Iterator[IO[bytes]]:
    """Standard output as bytes for ``what`` (say "the export"), flushed before the block ends.

    A full disk behind it (``> /dev/full``, a full file system) raised an OSError naming no file,
    reported as if the ledger's own files had met it; it is a DiskFull naming standard output and
    saying that ``what`` written there is incomplete, while the ledger is unchanged (exit 1)."""
    out = sys.stdout.buffer
    try:
        yield out
        out.flush()   # inside: a short export must not fail later, at exit, where nobody reports it
    except OSError as exc:
        if type(exc) is not OSError or not is_disk_full(exc):   # a closed pipe and the like: as before
            raise
        raise DiskFull(f"standard output: the disk is full ({exc.strerror}): {what} written there is "
                       "incomplete; the ledger is unchanged; free space and run the command again, "
                       "or give --out FILE (written whole or not at all)", exc.strerror or str(exc)) from None
