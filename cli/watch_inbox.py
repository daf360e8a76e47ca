"""Which inbox files are ready to read: ignore rules and the wait for a file to stop changing.

A file can reach the inbox three ways, and each tells us something different:

- moved in (the safe way: written elsewhere, then renamed in). The rename is atomic, so the file
  is complete; we only check that its size holds still for ``quiet`` seconds.
- written in place. inotify reports the creation, the writes and the close after writing; the
  file is not read while a writer holds it open, then must hold still for ``quiet`` seconds.
  A change after the rename or the close (an append, a chmod) makes it hold still again.
- found by a scan (at start, by the periodic rescan, or through the polling observer, which
  cannot tell a rename from a write). Nothing is known about its writer, so it must not have
  changed for ``settle`` seconds, judged by its modification time and by our own probes.

Files being written in place by a writer that closes and reopens them, pausing longer than
``quiet`` between writes, can be read too early; docs/watch.md says to write elsewhere and
rename in.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

# Names writers use while a file is incomplete (editors, rsync, downloads) and intake's own error
# notes. The one list for both `watch` and `ingest` of the inbox, so the two never disagree.
IGNORED_SUFFIXES = (".tmp", ".part", ".partial", ".swp", "~", ".error.txt")


def is_ignored(name: str) -> bool:
    """True for hidden and temporary names: ``.*``, ``*.tmp``, ``*.part``, ``*.partial``, ``*.swp``, ``*~``."""
    return name.startswith(".") or name.endswith(IGNORED_SUFFIXES)


def scan_inbox(inbox: Path) -> list[Path]:
    """The regular, non-ignored files directly in the inbox, then those directly in its
    non-ignored folders (a folder dropped in names the reconstruction collection of its
    documents), sorted by path. Symlinks are never followed."""
    try:
        entries = list(os.scandir(inbox))
    except FileNotFoundError:
        return []
    files = [Path(e.path) for e in entries if not is_ignored(e.name) and e.is_file(follow_symlinks=False)]
    for folder in entries:
        if not is_ignored(folder.name) and folder.is_dir(follow_symlinks=False):
            try:
                inner = list(os.scandir(folder.path))
            except OSError:  # gone or unreadable meanwhile: the next scan sees it
                continue
            files += [Path(e.path) for e in inner if not is_ignored(e.name) and e.is_file(follow_symlinks=False)]
    return sorted(files)


@dataclass
class _Seen:
    """What we know about one candidate file."""

    origin: str              # "moved", "written" or "found"
    writing: bool            # a writer may still hold it open (created or modified, no close yet)
    probe: tuple[int, int] | None = None   # (size, mtime_ns) at the last probe
    changed_at: float = 0.0  # monotonic time the probe last saw it change (or an event arrived)


class InboxTracker:
    """Candidate files and their state; ``ready()`` returns those safe to read now.

    Fed by the observer thread (``on_event``) and the main loop (``found``), read by the main
    loop; the caller serialises access (the daemon holds a lock around both).
    """

    def __init__(self, quiet: float = 0.2, settle: float = 1.0, stale_writer: float = 30.0):
        self.quiet = quiet
        self.settle = settle
        self.stale_writer = stale_writer
        self.files: dict[Path, _Seen] = {}

    def on_event(self, path: Path, kind: str) -> None:
        """An observer event: ``moved`` (renamed in), ``created``, ``modified`` or ``closed``."""
        now = time.monotonic()
        seen = self.files.get(path)
        if kind == "moved":
            self.files[path] = _Seen("moved", writing=False, changed_at=now)
        elif kind == "created":
            self.files[path] = _Seen("written", writing=True, changed_at=now)
        elif kind == "modified":
            if seen is None or seen.origin == "found":
                # Written to, and we did not see it opened: its writer may hold it open still.
                seen = self.files[path] = _Seen("written", writing=True)
            elif seen.origin == "moved":
                # Changed after its rename (a chmod, an append): not evidence of an open writer,
                # which would wait for a close that may never come; it must hold still again.
                seen.origin = "written"
            seen.changed_at = now
        elif kind == "closed":
            if seen is None:
                seen = self.files[path] = _Seen("written", writing=False)
            seen.writing, seen.changed_at = False, now

    def found(self, path: Path) -> None:
        """A file seen by a scan or by the polling observer; events already known take precedence."""
        if path not in self.files:
            self.files[path] = _Seen("found", writing=False)

    def forget(self, path: Path) -> None:
        """Stop tracking a file (ingested, or gone)."""
        self.files.pop(path, None)

    def pending(self) -> bool:
        """True while some candidate file is waiting to be ready."""
        return bool(self.files)

    def ready(self) -> list[Path]:
        """Probe every candidate; return the ones safe to read, sorted by name. Vanished ones are dropped."""
        now, wall = time.monotonic(), time.time()
        out = []
        for path, seen in list(self.files.items()):
            try:
                st = os.stat(path, follow_symlinks=False)
            except FileNotFoundError:
                self.forget(path)
                continue
            if not stat.S_ISREG(st.st_mode):   # symlinks, fifos: only regular files are read, as scans do
                self.forget(path)
                continue
            probe = (st.st_size, st.st_mtime_ns)
            if seen.probe is not None and probe != seen.probe:
                seen.probe, seen.changed_at = probe, now
                continue
            seen.probe = probe
            if self._is_ready(seen, now, wall - st.st_mtime_ns / 1e9):
                out.append(path)
        return sorted(out)

    def _is_ready(self, seen: _Seen, now: float, mtime_age: float) -> bool:
        """The rules of the module docstring, for one probed file."""
        if seen.writing and mtime_age < self.stale_writer:
            return False   # a lost close event must not hold a long-silent file back forever
        if mtime_age >= self.settle:
            return True    # unchanged for `settle` seconds, whatever wrote it
        known_complete = seen.origin == "moved" or (seen.origin == "written" and not seen.writing)
        return known_complete and seen.probe[0] > 0 and now - seen.changed_at >= self.quiet

    def next_check(self) -> float | None:
        """Seconds until it is worth probing again, or None when nothing is pending.

        Files held open by a writer are woken by their close event; they are probed only
        now and then, for the stale-writer rule.
        """
        if not self.files:
            return None
        if all(seen.writing for seen in self.files.values()):
            return 1.0
        return self.quiet / 2
