"""``evalledger.testing.hung``: a child that does not stop writes its Python stacks, then ends."""

from __future__ import annotations

import os
import subprocess
import sys

from evalledger.testing.hung import wait_or_dump, with_stacks

HANGS = "import time\ndef stuck_here():\n    time.sleep(60)\nprint('ready', flush=True)\nstuck_here()\n"


def test_a_child_that_exits_gives_its_exit_code():
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"], env=with_stacks(dict(os.environ)))
    assert wait_or_dump(proc, 30) == 3


def test_a_hung_child_writes_where_it_hangs_and_is_ended(tmp_path):
    log = tmp_path / "child.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", HANGS], stdout=subprocess.PIPE, stderr=err,
                                env=with_stacks(dict(os.environ)))
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    assert wait_or_dump(proc, 0.2) is None
    assert proc.poll() is not None, "the hung child is still running"
    stacks = log.read_text()
    assert "Fatal Python error: Aborted" in stacks and "stuck_here" in stacks, stacks
