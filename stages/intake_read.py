"""Reading an ingested file once: its bytes (or, for a large file, a private spool copy made as it
is read), their sha256 and size, and the identity of the file they came from. Hash, size check,
parse and filing away all use this one read (``intake_files`` checks a file against it before
moving it)."""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from evalledger.stages import intake_spool


def sha256_of(path: Path) -> tuple[str, int]:
    """The sha256 hex digest and size of a file, read in chunks."""
    with open(path, "rb") as fh:
        return _hash_rest(fh, hashlib.sha256(), 0)


def _hash_rest(fh, digest, size: int, limit: int | None = None) -> tuple[str, int]:
    """Feed the rest of an open file (up to ``limit`` bytes in all) to ``digest``; (hex digest, size)."""
    while limit is None or size < limit:
        chunk = fh.read(1 << 20 if limit is None else min(1 << 20, limit - size))
        if not chunk:
            break
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


# A file larger than this is copied to a private spool file as it is read, not held in memory,
# and a native benchmark among them is taken in item by item (intake_stream).
SPOOL_ABOVE = 1 << 20


@dataclass(frozen=True)
class FileRead:
    """One read of a file: its bytes (in ``raw``, or in the private copy ``spool`` for a large
    file; neither when over the limit), their sha256 and size, and the identity (device, inode)
    of the file they came from."""

    raw: bytes | None
    sha256: str
    size: int
    identity: tuple[int, int]
    spool: Path | None = None

    @property
    def over_limit(self) -> bool:
        """True when the file was over the size limit: its bytes were hashed, not kept."""
        return self.raw is None and self.spool is None

    def whole(self) -> bytes:
        """The bytes read (from the spool when there is one)."""
        if self.raw is not None:
            return self.raw
        assert self.spool is not None, "a file over the limit has no bytes"
        return self.spool.read_bytes()


def read_once(path: Path, max_bytes: int, spool_above: int | None = None,
              spool_dir: Path | None = None) -> FileRead:
    """Read a file once, at most ``max_bytes`` + 1 bytes: hash, size check and parse all use this read.

    Reading twice (hash, then parse) let a file replaced in between be recorded under the first
    file's hash with the second one's content; and a file growing after a size check got past it.
    A file over ``spool_above`` bytes (default ``SPOOL_ABOVE``) is copied, as it is read, to a
    private file in ``spool_dir`` (the caller removes it): what is parsed is still exactly what
    was hashed, and memory does not grow with the file.
    """
    spool_above = SPOOL_ABOVE if spool_above is None else spool_above
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        identity = (st.st_dev, st.st_ino)
        raw = fh.read(min(max_bytes, spool_above) + 1)
        if len(raw) <= min(max_bytes, spool_above):
            return FileRead(raw, hashlib.sha256(raw).hexdigest(), len(raw), identity)
        if len(raw) <= max_bytes:
            return _spool(fh, raw, max_bytes, identity, spool_dir)
        # The same open file, so the hash names what was read; bounded by the size it had when
        # opened, so a file that keeps growing (or a pipe) cannot keep us reading.
        sha, size = _hash_rest(fh, hashlib.sha256(raw), len(raw), limit=max(st.st_size, len(raw)))
    return FileRead(None, sha, size, identity)


def _spool(fh, head: bytes, max_bytes: int, identity: tuple[int, int], folder: Path | None) -> FileRead:
    """Copy ``head`` and the rest of the open file ``fh`` (up to ``max_bytes`` + 1 in all) to a
    new private file while hashing them; a file over the limit keeps no copy."""
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=folder, prefix=intake_spool.prefix(intake_spool.SPOOL))
    digest, size = hashlib.sha256(), 0
    try:
        with os.fdopen(fd, "wb") as out:
            chunk = head
            while chunk and size <= max_bytes:
                digest.update(chunk)
                out.write(chunk)
                size += len(chunk)
                chunk = fh.read(min(1 << 20, max_bytes + 1 - size))
        if size <= max_bytes:
            return FileRead(None, digest.hexdigest(), size, identity, spool=Path(name))
        sha, size = _hash_rest(fh, digest, size, limit=max(os.fstat(fh.fileno()).st_size, size))
    except BaseException:
        os.unlink(name)
        raise
    os.unlink(name)
    return FileRead(None, sha, size, identity)
