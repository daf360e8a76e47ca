"""The look for files a killed ingest left hidden (``.taking-``) in processed/ and rejected/ runs
before every inbox scan of a long-lived process; processed/ keeps every file ever processed, so it
lists a folder again only when something was renamed in since a look that found nothing, and
never trusts a folder time too recent to tell a later rename apart, nor one where a hidden file's
process was still running."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from evalledger.stages import intake_spool

_LISTED: list[str] = []
_COUNTING = [False]


def _count_listings(event: str, args: tuple) -> None:
    """Audit hook: note every directory ``os.scandir`` lists while a test counts."""
    if _COUNTING[0] and event == "os.scandir":
        _LISTED.append(os.fspath(args[0]))


sys.addaudithook(_count_listings)   # Python's own audit events: os.scandir raises one per listing


def look(home: Path) -> tuple[list[Path], list[str]]:
    """(files put back, folders listed) of one look into home's processed/ and rejected/."""
    _LISTED.clear()
    _COUNTING[0] = True
    try:
        restored = intake_spool.put_back_taken([home / "processed", home / "rejected"], home / "inbox",
                                               lambda taken: "recovered.json")
    finally:
        _COUNTING[0] = False
    return restored, list(_LISTED)


def settle(folder: Path) -> None:
    """Give ``folder`` a modification time a minute old (a daemon that has run a while)."""
    past = time.time() - 60
    os.utime(folder, (past, past))


def home_with_files(tmp_path: Path, kept: int) -> Path:
    """A home-like folder with ``kept`` processed files and an empty rejected/ and inbox/."""
    home = tmp_path / "home"
    for name in ("processed", "rejected", "inbox"):
        (home / name).mkdir(parents=True)
    for i in range(kept):
        (home / "processed" / f"{i:064x}.json").write_text("{}")
    return home


def dead_pid() -> int:
    """The id of a process that has ended."""
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True).stdout)


def test_a_settled_folder_is_listed_again_only_once_a_file_is_renamed_in(tmp_path):
    home = home_with_files(tmp_path, 50)
    settle(home / "processed")
    settle(home / "rejected")
    restored, listed = look(home)
    assert restored == [] and str(home / "processed") in listed
    restored, listed = look(home)
    assert restored == [] and listed == [], "an unchanged folder with nothing hidden is not listed again"

    # a killed ingest's hidden file, renamed in as the two-rename filing does
    spare = tmp_path / "bench.json"
    spare.write_text('{"questions": []}')
    hidden = home / "processed" / f".taking-{dead_pid()}-{'0' * 16}-bench.json"
    os.replace(spare, hidden)
    restored, listed = look(home)
    assert restored == [home / "inbox" / "bench.json"] and not hidden.exists()
    assert (home / "inbox" / "bench.json").read_text() == '{"questions": []}'


def test_a_folder_changed_in_the_last_seconds_is_listed_at_every_look(tmp_path):
    # its time may be that of a rename in the same clock tick as the look: it says nothing yet
    home = home_with_files(tmp_path, 5)
    for _ in range(3):
        _, listed = look(home)
        assert str(home / "processed") in listed


def test_a_hidden_file_of_a_running_ingest_is_put_back_once_its_process_is_gone(tmp_path):
    home = home_with_files(tmp_path, 5)
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        hidden = home / "processed" / f".taking-{owner.pid}-{'1' * 16}-live.json"
        hidden.write_text("{}")
        settle(home / "processed")
        restored, listed = look(home)
        assert restored == [] and hidden.exists(), "a running ingest's file is its own"
    finally:
        owner.kill()
        owner.wait()
    # the folder did not change when the process died: it must be looked at again all the same
    restored, listed = look(home)
    assert restored == [home / "inbox" / "live.json"] and not hidden.exists()
