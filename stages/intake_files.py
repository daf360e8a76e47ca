"""Filing an ingested file away: an accepted file to ``processed/<sha256>.<ext>`` (moved from the
inbox, else copied), a rejected inbox file to ``rejected/`` beside its ``.error.txt``; a file
dropped as a folder leaves the folder empty, and then removed. An inbox file is moved in two
renames through a hidden ``.taking-`` name (``intake_spool``) and checked, between them, to be the
bytes that were read (``intake_read``); what a kill between them left is put back by
``put_back_taken``."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from evalledger.ledger import Ledger
from evalledger.stages import intake_events as ev
from evalledger.stages import intake_spool
from evalledger.stages.intake_read import FileRead, sha256_of


def put_back_taken(home: str | os.PathLike, led: Ledger) -> list[Path]:
    """Put back in the inbox every file an ingest killed while filing it away left under a hidden
    name in processed/ or rejected/ (its process gone); returns their paths in the inbox. Called
    before the inbox is scanned: the next pass files each one (its events, if committed, are not
    added twice). A hidden name of the old form carries no file name: ``led`` gives it
    (``name_for_old_taken``)."""
    home = Path(home)
    return intake_spool.put_back_taken([home / "processed", home / "rejected"], home / "inbox",
                                       lambda taken: name_for_old_taken(led, taken))


def name_for_old_taken(led: Ledger, taken: Path) -> str:
    """The inbox name for a file hidden under the old ``.taking-<sha16>-<pid>`` form: the name the
    ledger recorded for its bytes (``file.received``, else ``benchmark.rejected``), so ingesting it
    again finds them known (or rejected with the same errors) and files it where it was going;
    ``recovered-<sha16>.json`` when the ledger has no name for them, or one the inbox scan would
    pass over (not ``.json``, ``.jsonl`` or ``.jsonld``, or hidden) or cannot hold (a path, a
    NUL, over 255 bytes)."""
    sha, _ = sha256_of(taken)
    name = _recorded_name(led, sha)
    if name is None or name.startswith(".") or Path(name).suffix.lower() not in (".json", ".jsonl", ".jsonld") \
            or "/" in name or "\0" in name \
            or len(os.fsencode(name)) > 255:   # (a name not UTF-8 is recorded with U+FFFD: longer)
        return f"recovered-{sha[:16]}.json"
    return name


def _recorded_name(led: Ledger, sha: str) -> str | None:
    """The file name the ledger recorded for the bytes with this sha256, or None."""
    received = led.get(ev.file_event_id(sha))
    if received is not None:
        return str(received.data["file"])
    names = [e.data["file"] for e in led.read(types=["benchmark.rejected"], stream=f"file:{sha}")]
    return str(names[-1]) if names else None   # the latest rejection's


def drop_empty_folder(folder: Path) -> None:
    """Remove a folder dropped into the inbox once its last file has been taken (never a
    folder with anything left in it)."""
    try:
        folder.rmdir()
    except OSError:  # not empty (more files to come, or ignored ones), or gone: leave it
        pass


def file_away(home: Path, path: Path, read: FileRead, from_inbox: bool,
              rejection: list[str] | None = None) -> Path | None:
    """processed/<sha256>.<ext> for accepted files (moved from the inbox, else copied);
    rejected/<name> plus <name>.error.txt (the lines of ``rejection``) for rejected inbox files
    (``rejection`` is None for a file that was not rejected)."""
    if rejection is not None:
        return _move_rejected(home, path, read, rejection) if from_inbox else None
    dest = home / "processed" / f"{read.sha256}{path.suffix.lower()}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    if from_inbox:
        taken = _take(path, read, dest.parent)
        if taken is not None and not dest.exists():
            os.replace(taken, dest)
        elif taken is not None:
            taken.unlink()
    if not dest.exists() and not read.over_limit:   # copied, or the inbox file was replaced meanwhile:
        _atomic_write(read, dest)                      # keep what was ingested (an accepted file was read whole)
    return dest


def _take(path: Path, read: FileRead, folder: Path) -> Path | None:
    """Move ``path`` to a hidden name in ``folder`` if it is still the file that was read; else None.

    The rename comes first and the check after it, on the file renamed, so a file swapped in at
    any moment is never taken for the one read: it goes back to the inbox, to be ingested itself.
    """
    if read.over_limit or not _same_device(path, folder):
        # over the limit (no bytes to write instead), or another device: check, then move
        try:
            st = path.stat()
        except FileNotFoundError:
            return None
        if (st.st_dev, st.st_ino) != read.identity or not _unchanged(path, read):
            return None
        taking = folder / intake_spool.taking_name(read.sha256, path.name)
        try:
            shutil.move(str(path), taking)
        except FileNotFoundError:
            return None
        return taking
    taking = folder / intake_spool.taking_name(read.sha256, path.name)
    try:
        os.replace(path, taking)
    except FileNotFoundError:
        return None   # another process (the watch daemon, a second ingest) filed it first
    st = taking.stat()
    if (st.st_dev, st.st_ino) == read.identity and _unchanged(taking, read):
        return taking
    intake_spool.put_back(taking, path)
    return None


def _unchanged(path: Path, read: FileRead) -> bool:
    """True when ``path`` still holds the bytes read: the same inode written to since (appended,
    rewritten) would otherwise be filed as ``processed/<sha256>`` of bytes it no longer holds."""
    if path.stat().st_size != read.size:
        return False
    return read.over_limit or sha256_of(path)[0] == read.sha256


def _move_rejected(home: Path, path: Path, read: FileRead, rejection: list[str]) -> Path:
    """Move a rejected inbox file to rejected/<name> (rejected/<stem>.<sha12><ext> when that name
    is taken or too long: ``_rejected_name``), its error note ``rejection`` written first as
    <name>.error.txt."""
    folder = home / "rejected"
    folder.mkdir(parents=True, exist_ok=True)
    dest = folder / _rejected_name(folder, path.name, read.sha256)
    # The error note goes first (written whole, then renamed): a kill between the two steps leaves
    # the file in the inbox with its note already in rejected/, never a rejected file without one.
    note = Path(f"{dest}.error.txt")
    partial = note.with_name(f".{note.name}.part")
    partial.write_text("\n".join(rejection) + "\n", encoding="utf-8")
    os.replace(partial, note)
    taken = _take(path, read, folder)
    if taken is not None:
        os.replace(taken, dest)
    elif not read.over_limit and not dest.exists():   # replaced meanwhile: keep what was read
        _atomic_write(read, dest)
    return dest


# The longest name whose hidden partial note ``.<name>.error.txt.part`` still fits in 255 bytes.
_REJECTED_NAME_BYTES = 255 - len(".") - len(".error.txt") - len(".part")


def _rejected_name(folder: Path, name: str, sha256: str) -> str:
    """The name of a rejected file in ``folder``: its own, or ``<stem>.<sha12><ext>`` when that is
    taken or too long for its ``.error.txt`` beside it (the stem then cut to fit): a name the file
    system refused left the file in the inbox, rejected again at every pass and never filed."""
    if len(os.fsencode(name)) <= _REJECTED_NAME_BYTES and not (folder / name).exists():
        return name
    suffix = Path(name).suffix[:16]
    tail = f".{sha256[:12]}{suffix}"
    stem = name[:len(name) - len(Path(name).suffix)] if suffix else name
    while stem and len(os.fsencode(stem + tail)) > _REJECTED_NAME_BYTES:
        stem = stem[:-1]   # by characters, so a cut never splits one
    return stem + tail


def _same_device(path: Path, folder: Path) -> bool:
    """True when ``path`` and ``folder`` are on the same device (a rename can move one into the other)."""
    try:
        return path.stat().st_dev == folder.stat().st_dev
    except OSError:
        return False


def _atomic_write(read: FileRead, dest: Path) -> None:
    """Write the bytes read beside the destination, then rename: a reader never sees half a file."""
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".incoming-")
    try:
        with os.fdopen(fd, "wb") as fh:
            if read.raw is not None:
                fh.write(read.raw)
            else:
                assert read.spool is not None
                with open(read.spool, "rb") as spool:
                    shutil.copyfileobj(spool, fh, 1 << 20)
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
