"""A real small disk for the tests of full disks: a tmpfs mounted for one test (root only)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def mounted_tmpfs(folder: Path, size: str, inodes: int | None = None) -> Iterator[Path]:
    """Mount a tmpfs of ``size`` (e.g. "16m") on a new ``folder`` and unmount it afterwards; the
    test is skipped where mounting is not allowed. ``inodes``: at most that many files and folders
    (the root included), so creating one more fails as a full disk does (ENOSPC) while a file
    rewritten in place still has room."""
    folder.mkdir()
    options = f"size={size}" + (f",nr_inodes={inodes}" if inodes else "")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)
