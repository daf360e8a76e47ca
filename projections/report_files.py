"""Where rendered report files go: a folder written one file at a time, or a dict in memory.

A renderer hands each file to a sink as soon as it is produced (``put``, or ``stream`` for a file
written in pieces), so no sink needs every file at once. ``FolderSink`` writes only what changed
(atomically), and on ``finish`` removes files an earlier render wrote that this one no longer
produced, so an updated folder equals a rebuilt one file for file.
"""

from __future__ import annotations

import filecmp
import io
import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Iterator, Protocol

from evalledger.ledger.filelock import FileLock
from evalledger.ledger.whole_files import naming

MANIFEST = ".evalledger-reports"
INCOMPLETE = "INCOMPLETE.md"   # left by a render that failed part way, removed by one that finishes


@contextmanager
def folder_turn(directory: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the reports folder itself for the body (the folder is made
    if missing): two processes refreshing the reports at once (the watch daemon's and a user's
    ``report``, a ``rebuild``) take turns, so neither renders read models the other is dropping
    and their files never interleave in the folder. No file is made for it (the folder is opened
    read-only, as an existing lock file is); the kernel drops the lock of a process that dies."""
    directory.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(directory), create=False)
    try:
        with lock.exclusive():
            yield
    finally:
        lock.close()


class Sink(Protocol):
    """Takes the report files one by one."""

    def put(self, rel: str, data: bytes) -> None:
        """Take the whole file ``rel`` (a path relative to the reports folder)."""

    def stream(self, rel: str) -> Iterator[BinaryIO]:
        """A context giving a binary writer for ``rel``; the file is complete when it closes."""


class DictSink:
    """Keeps every file in memory: relative path -> bytes (for ``render`` and tests)."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def put(self, rel: str, data: bytes) -> None:
        """Keep ``data`` as file ``rel``."""
        self.files[rel] = data

    @contextmanager
    def stream(self, rel: str) -> Iterator[BinaryIO]:
        """Collect the pieces written, then keep them as file ``rel``."""
        buffer = io.BytesIO()
        yield buffer
        self.files[rel] = buffer.getvalue()


class FolderSink:
    """Writes each file into ``directory`` as it comes; ``finish`` drops stale files, writes the manifest."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.names: list[str] = []
        self.changed = False   # a file of the folder was written (an abort then leaves it mixed)
        directory.mkdir(parents=True, exist_ok=True)
        manifest = directory / MANIFEST
        self.previous = set(manifest.read_text().splitlines()) if manifest.exists() else set()

    def put(self, rel: str, data: bytes) -> None:
        """Write ``data`` to ``rel`` unless the file already holds exactly these bytes."""
        path = self._claim(rel)
        if path.exists() and path.read_bytes() == data:
            return
        self._changing()
        path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(path, data)

    @contextmanager
    def stream(self, rel: str) -> Iterator[BinaryIO]:
        """Write ``rel`` in pieces into a temporary file; it replaces the file only when different."""
        path = self._claim(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = _temporary(path)
        try:
            with naming(path, tmp), open(tmp, "wb") as out:
                yield out
            if path.exists() and filecmp.cmp(tmp, path, shallow=False):
                tmp.unlink()
            else:
                self._changing()
                os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)

    def _changing(self) -> None:
        """Before the first file of the folder changes, leave ``INCOMPLETE.md`` (``finish`` removes
        it): a render that then fails leaves a folder mixing two renders, and on a full disk there
        may be no room left by then for ``abort`` to say so, so the folder looked whole. When even
        the note cannot be written, the error stops the render before any file has changed."""
        if not self.changed:
            _atomic_write(self.directory / INCOMPLETE, _incomplete_note(None))
            self.changed = True

    def _claim(self, rel: str) -> Path:
        """Note ``rel`` as produced by this render; its path."""
        self.names.append(rel)
        return self.directory / rel

    def finish(self) -> list[Path]:
        """Remove what an earlier render wrote and this one did not, write the manifest; the paths.

        Removing a stale file changes the folder as writing one does, so it leaves ``INCOMPLETE.md``
        first: a removal or a manifest write that then fails (call ``abort``) leaves the note,
        where a render that had written nothing else left a folder that looked whole."""
        names = sorted(self.names)
        stale = sorted(self.previous - set(names))
        if any((self.directory / rel).is_file() for rel in stale):
            self._changing()
        _drop_stale(self.directory, stale)
        _drop_dead_temporaries(self.directory)
        _atomic_write(self.directory / MANIFEST, "".join(rel + "\n" for rel in names).encode())
        (self.directory / INCOMPLETE).unlink(missing_ok=True)
        return [self.directory / rel for rel in names]

    def abort(self, reason: BaseException) -> None:
        """The render failed part way: the folder now mixes this render's files with an earlier
        one's, so say why in ``INCOMPLETE.md`` (left by the first change, removed by a finished
        render), and list every file either render wrote in the manifest, so the next render
        removes what it does not produce. Nothing is said when no file was written yet: the folder
        is the earlier render's. Best effort: the failure may be that nothing more can be written
        here, and the note left by the first change then says the folder is incomplete."""
        if not self.changed:
            return
        names = sorted(self.previous | set(self.names))
        for rel, data in ((INCOMPLETE, _incomplete_note(reason)), (MANIFEST, "".join(r + "\n" for r in names).encode())):
            try:
                _atomic_write(self.directory / rel, data)
            except OSError:   # a full disk, a read-only folder: the render's own error says so
                pass


def _incomplete_note(reason: BaseException | None) -> bytes:
    """The text of ``INCOMPLETE.md``: while a render rewrites the folder (``reason`` None), or
    after one failed part way, saying why."""
    if reason is None:
        what = ("A render (`evalledger report`, `rebuild` or the watch daemon) is rewriting this folder, "
                "or stopped part way with no room left to say why, so it may mix files of that render with "
                "files of an earlier one: do not read them as one report.")
    else:
        what = ("The last `evalledger report` (or `rebuild`) failed part way, so this folder mixes files "
                "of that render with files of an earlier one: do not read them as one report. "
                f"What failed: {' '.join(str(reason).split()) or type(reason).__name__}")
    return (f"# These reports are incomplete\n\n{what}\n\nRun `evalledger report` again once the cause "
            "is fixed; a render that finishes removes this file.\n").encode()


def write_files(directory: Path, files: dict[str, bytes]) -> list[Path]:
    """Write the rendered files (only those whose bytes changed), drop stale ones; all paths back."""
    sink = FolderSink(directory)
    try:
        for rel, data in sorted(files.items()):
            sink.put(rel, data)
        return sink.finish()
    except BaseException as exc:   # the folder mixes two renders: say so (FolderSink.abort)
        sink.abort(exc)
        raise


def _drop_stale(directory: Path, stale_names: list[str]) -> None:
    """Remove these files, and the folders they leave empty."""
    for rel in stale_names:
        stale = directory / rel
        if stale.is_file():
            stale.unlink(missing_ok=True)
        for parent in stale.parents:            # folders the stale file leaves empty go too
            if parent == directory or not parent.is_dir() or any(parent.iterdir()):
                break
            try:
                parent.rmdir()
            except OSError:                      # another reporter just wrote into it
                break


def _drop_dead_temporaries(directory: Path) -> None:
    """Remove the temporary files of reporters that died between writing and renaming (a SIGKILL):
    ``.<name>.<pid>.<thread>.tmp`` whose process is gone. A live reporter's are left alone."""
    for tmp in directory.rglob(".*.tmp"):
        parts = tmp.name.rsplit(".", 3)
        if len(parts) != 4 or not parts[1].isdigit():
            continue
        pid = int(parts[1])
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            tmp.unlink(missing_ok=True)
        except PermissionError:   # alive, another user's
            continue


def _temporary(path: Path) -> Path:
    """The temporary file for ``path``, named for this process and thread."""
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def _atomic_write(path: Path, data: bytes) -> None:
    """Write via a temporary file named for this process and thread, then rename over ``path``
    (two reporters at once, a daemon's and a user's, never see or leave half a file)."""
    tmp = _temporary(path)
    try:
        with naming(path, tmp):
            tmp.write_bytes(data)
    except OSError:
        tmp.unlink(missing_ok=True)   # half a file a full disk cut short
        raise
    os.replace(tmp, path)
