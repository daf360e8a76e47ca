"""Files written whole or not at all: under a hidden temporary name beside them, synced, then renamed
into place, so a writer that fails or is killed leaves what the file held before."""

from __future__ import annotations

import errno
import os
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator


def partial_name(path: Path) -> Path:
    """Where a file is written before it is renamed to ``path``: hidden, named for this process."""
    return path.with_name(f".{path.name}.{os.getpid()}.partial")


def open_partial(path: Path) -> IO[bytes]:
    """Open ``partial_name(path)`` for writing; an error names ``path``, the file the user asked for
    (a folder there is an IsADirectoryError, as opening it would be)."""
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    try:
        return open(partial_name(path), "wb")
    except OSError as exc:
        raise type(exc)(exc.errno, exc.strerror, str(path)) from None


def synced(fh: IO[bytes]) -> None:
    """Flush ``fh`` to the disk: a file renamed into place must hold its bytes after a power cut."""
    fh.flush()
    os.fsync(fh.fileno())


@contextmanager
def naming(path: Path, tmp: Path | None = None) -> Iterator[None]:
    """Raise an OSError that names no file (a write or a close that met a full disk), or names
    ``tmp``, the hidden temporary ``path`` is written to, again naming ``path``: the error line
    then says which file could not be written, not only why. Subclasses (PermissionError, ours
    that say what they mean) and errors naming another file pass as they are."""
    try:
        yield
    except OSError as exc:
        if exc.filename not in (None, str(tmp) if tmp is not None else None) or exc.errno is None \
                or type(exc) is not OSError:
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from exc


def write_whole(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all (OSError naming ``path`` when it cannot be)."""
    try:
        with open_partial(path) as fh, naming(path):
            fh.write(data)
            synced(fh)
        os.replace(partial_name(path), path)
    finally:
        partial_name(path).unlink(missing_ok=True)
