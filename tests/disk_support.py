"""A real small disk for the tests of full disks: a tmpfs mounted for one test (root only)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def mounted_tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """Mount a tmpfs of ``size`` (e.g. "16m") on a new ``folder`` and unmount it afterwards; the
    test is skipped where mounting is not allowed."""
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)
