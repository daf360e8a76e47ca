"""``evalledger status`` keeps its temporary facts file beside the home's other spills (in
``processed/``, on the home's disk) rather than in the system's temporary folder, which is often a
small tmpfs a big home's facts could fill; the file is gone when status ends, and a spill folder
a killed status left is removed, not tripped over."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import cli
from evalledger.testing.arithmetic import arithmetic_benchmark


def dead_pid() -> int:
    """The id of a process that has ended (a killed status's folder carries one)."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_status_spills_in_the_home_not_the_system_temp_folder_and_leaves_nothing(tmp_path):
    home = tmp_path / "home"
    assert cli("init", home=home).returncode == 0
    source = tmp_path / "bench.json"
    source.write_text(json.dumps(arithmetic_benchmark(3, "spill")))
    assert cli("ingest", source, home=home).returncode == 0
    stale = home / "processed" / f".spill-{dead_pid()}-left"   # what a status killed mid-way left
    stale.mkdir()
    (stale / "states.db").write_bytes(b"half written")
    system_temp = tmp_path / "system-temp"
    system_temp.mkdir()
    touched = system_temp.stat().st_mtime_ns   # a file made and removed there changes it
    done = cli("status", "--json", home=home, env={"TMPDIR": str(system_temp)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["cases"] == {"opened": 6, "judged": 0, "failed": 0}
    assert system_temp.stat().st_mtime_ns == touched and not list(system_temp.iterdir())
    assert not [p.name for p in (home / "processed").iterdir() if p.name.startswith(".spill-")]
    assert not stale.exists()
