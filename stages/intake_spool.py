"""The names of intake's temporary files (a large file's spool, a benchmark's spill folder, an
inbox file being taken), and what becomes of those a killed ingest left behind.

Each name carries the id of the process that made it: a ``kill -9`` mid-ingest leaves its spool
(up to the size limit, 50 MB by default) and spill folder in ``processed/``, and the next ingest
removes those whose process is gone, never those of an ingest still running beside it. An inbox
file is filed away in two renames (to a hidden ``.taking-`` name, checked, then to its place): one
killed between them is put back in the inbox, to be filed (or ingested) again, never deleted;
one hidden under the old name form (no file name in it) goes back under a name the caller gives.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path
from typing import Callable

SPOOL = ".spool-"
SPILL = ".spill-"
TAKING = ".taking-"
# A long-lived process (the watch daemon ingests for days) looks for a killed ingest's spools and
# spill folders in a folder at most this often: each look lists processed/, which keeps every
# file ever processed, and ran before every file ingested.
LEFTOVERS_EVERY_SECONDS = 60.0
_leftovers_looked: dict[Path, float] = {}   # folder -> monotonic time of this process's last look
# Folders whose last look found no hidden name, by the modification time (ns) they had then: a
# file renamed in since changes it, so an unchanged folder is not listed again (processed/ keeps
# every file ever processed: a million of them took 1.4 s to list, at every inbox scan). Kept only
# when that time was already SETTLED_NS old at the look: a rename in the same tick of the file
# system's clock could leave the time as it was.
_quiet_folders: dict[Path, int] = {}
SETTLED_NS = 2_000_000_000
_TAKING_NAME = re.compile(r"\.taking-(\d+)-[0-9a-f]{16}-(.+)", re.DOTALL)
_OLD_TAKING_NAME = re.compile(r"\.taking-[0-9a-f]{16}-(\d+)")   # before the file's name was kept


def prefix(kind: str) -> str:
    """The name prefix of a temporary file of ``kind`` (SPOOL, SPILL or TAKING) made by this process."""
    return f"{kind}{os.getpid()}-"


def taking_name(sha256: str, name: str) -> str:
    """The hidden name an inbox file has between its two renames: this process, the first digits
    of its hash and its own name (so a file put back keeps its name and format), within 255 bytes."""
    head = f"{prefix(TAKING)}{sha256[:16]}-"
    return head + (name if len(os.fsencode(head + name)) <= 255 else f"file{Path(name).suffix[:16]}")


def put_back_taken(folders: list[Path], inbox: Path, old_name: Callable[[Path], str]) -> list[Path]:
    """Put every inbox file a killed process left under its hidden ``.taking-`` name in ``folders``
    back in ``inbox`` (under its name, or beside it when that name is taken); returns the new paths.
    Its events may be committed already: ingesting it again files it away and adds nothing. A name
    of the old form (``.taking-<sha16>-<pid>``, from before the name was kept) goes back under
    ``old_name(path)``."""
    restored = []
    for folder in folders:
        changed = _changed_since_quiet(folder)
        if changed is None:
            continue
        hidden = _named(folder, (TAKING,))
        for entry in hidden:
            owner, name = _taken(entry.name)
            if owner is None or _running(owner) or not entry.is_file():
                continue
            inbox.mkdir(parents=True, exist_ok=True)
            taken = Path(entry.path)
            restored.append(put_back(taken, inbox / (name if name is not None else old_name(taken))))
        if not hidden and time.time_ns() - changed >= SETTLED_NS:
            _quiet_folders[folder] = changed
        else:   # a hidden file of a live ingest is looked at again: its process may die
            _quiet_folders.pop(folder, None)
    return restored


def _changed_since_quiet(folder: Path) -> int | None:
    """``folder``'s modification time (ns), or None when it is the time of a look that found no
    hidden name there (nothing was renamed in since), or there is no such folder."""
    try:
        changed = folder.stat().st_mtime_ns
    except OSError:
        return None
    return None if _quiet_folders.get(folder) == changed else changed


def _taken(hidden: str) -> tuple[int | None, str | None]:
    """(process id, file name) in a hidden ``.taking-`` name: ``.taking-<pid>-<sha16>-<name>``, or
    the old form ``.taking-<sha16>-<pid>`` (no name: None); (None, None) for any other name."""
    found = _TAKING_NAME.fullmatch(hidden)
    if found is not None:
        return int(found[1]), found[2]
    found = _OLD_TAKING_NAME.fullmatch(hidden)
    return (int(found[1]), None) if found is not None else (None, None)


def put_back(taken: Path, path: Path) -> Path:
    """Return a file taken to the inbox as ``path`` if that name is free, else beside it (never
    replacing a file dropped there since); returns where it went."""
    try:
        os.link(taken, path)
    except FileExistsError:
        beside = path.with_name(f"{path.stem}.{os.getpid()}-{taken.stat().st_ino}{path.suffix}")
        os.replace(taken, beside)
        return beside
    taken.unlink()
    return path


def remove_leftovers(folder: Path) -> None:
    """Remove the spools and spill folders in ``folder`` whose process no longer runs (a file
    being taken is put back by ``put_back_taken``, never removed); in one process, at most once
    every ``LEFTOVERS_EVERY_SECONDS`` for a folder (they hold nothing the ledger needs)."""
    now = time.monotonic()
    if now - _leftovers_looked.get(folder, -LEFTOVERS_EVERY_SECONDS) < LEFTOVERS_EVERY_SECONDS:
        return
    _leftovers_looked[folder] = now
    for entry in _named(folder, (SPOOL, SPILL)):
        owner = _owner(entry.name)
        if owner is not None and not _running(owner):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                Path(entry.path).unlink(missing_ok=True)


def _named(folder: Path, prefixes: tuple[str, ...]) -> list[os.DirEntry[str]]:
    """The entries of ``folder`` whose names start with one of ``prefixes`` (none when there is no
    such folder or it cannot be read). The folder holds every file ever processed: its other
    entries are passed over by name alone (``os.scandir``: no stat, no Path made for them)."""
    try:
        with os.scandir(folder) as entries:
            return [entry for entry in entries if entry.name.startswith(prefixes)]
    except OSError:   # no folder yet (nothing spooled there), or unreadable: nothing there
        return []


def _owner(name: str) -> int | None:
    """The process id in a spool's or spill folder's name; None for any other name."""
    for kind in (SPOOL, SPILL):
        if name.startswith(kind):
            pid = name[len(kind):].split("-", 1)[0]
            return int(pid) if pid.isdigit() else None
    return None


def _running(pid: int) -> bool:
    """True when process ``pid`` exists (another user's process counts: it is not ours to judge)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):   # (a number no process id can be)
        return False
    except PermissionError:
        return True
    return True
