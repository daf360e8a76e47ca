"""Readers of the read models while a second process rebuilds them: ``agreement``, ``whatif`` and
the viewer each read one snapshot, folded to the head, so every read gives what it gives with
nobody rebuilding. They read the tables in several statements; a rebuild dropped them (and folded
them again) in between, and the reader saw the runs of one state and the cases of another, or
none at all: whatif answered with no case, agreement with no review, the viewer's case table went
empty until the next event."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from evalledger import ledger
from evalledger.cli.main import main
from evalledger.cli.viewer import make_app
from test_compact_rows import judged

# Rebuilds the read models (as `evalledger rebuild` does) until the stop file appears.
REBUILDER = """
import sys
from pathlib import Path
from evalledger import ledger, projections
home, stop = sys.argv[1], Path(sys.argv[2])
count = 0
with ledger.open_ledger(home) as led:
    while not stop.exists():
        projections.rebuild(led)
        count += 1
        if count == 1:
            (stop.parent / "rebuilding").touch()
print(count)
"""
SECONDS = 3.0   # of reads while the other process rebuilds: several dozen rebuilds


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory) -> Path:
    """A judged home with one case overridden by a reviewer (so agreement has a review to count)."""
    home = judged(tmp_path_factory.mktemp("snap"))
    with ledger.open_ledger(home, readonly=True) as led:
        case = next(led.read(types=["case.judged"])).data["case_id"]
    assert main(["--home", str(home), "override", case, "--verdict", "pass", "--reason", "checked",
                 "--author", "rev"]) == 0
    return home


class Rebuilding:
    """A second process rebuilding the read models of ``home`` for the body, started once it rebuilt once."""

    def __init__(self, home: Path):
        self.home, self.stop = home, home.parent / "stop"

    def __enter__(self) -> "Rebuilding":
        self.proc = subprocess.Popen([sys.executable, "-c", REBUILDER, str(self.home), str(self.stop)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while not (self.home.parent / "rebuilding").exists():
            assert self.proc.poll() is None and time.monotonic() < deadline, self.proc.communicate()
            time.sleep(0.01)
        return self

    def __exit__(self, *exc) -> None:
        self.stop.touch()
        out, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0 and "Traceback" not in err.decode(), err.decode()[-2000:]
        self.rebuilds = int(out)


def copy_of(home: Path, to: Path) -> Path:
    """A copy of the home (each test races on its own)."""
    return Path(shutil.copytree(home, to / "home"))


def printed(capsys, *args: str) -> str:
    """What ``evalledger ARGS`` prints (run in this process), after checking it exits 0."""
    assert main(list(args)) == 0, capsys.readouterr().err
    return capsys.readouterr().out


@pytest.mark.parametrize("command", [["agreement", "--json"],
                                     ["whatif", "--set", "deep_judgment_fuzzy_match_threshold=0.1,0.9",
                                      "--json", "--quiet"]], ids=["agreement", "whatif"])
def test_agreement_and_whatif_while_another_process_rebuilds_read_one_whole_state(reviewed, tmp_path, capsys,
                                                                                   command):
    home = copy_of(reviewed, tmp_path)
    alone = printed(capsys, "--home", str(home), *command)
    assert '"reviewed": 1' in alone or '"cases": 3' in alone, alone   # the state it must give every time
    rounds = 0
    with Rebuilding(home) as other:
        end = time.monotonic() + SECONDS
        while time.monotonic() < end:
            assert printed(capsys, "--home", str(home), *command) == alone, f"round {rounds}"
            rounds += 1
    assert rounds >= 5 and other.rebuilds >= 5, (rounds, other.rebuilds)


def test_the_viewer_while_another_process_rebuilds_reads_one_whole_state(reviewed, tmp_path):
    home = copy_of(reviewed, tmp_path)
    with ledger.open_ledger(home, readonly=True) as led:
        cases = sorted({e.data["case_id"] for e in led.read(types=["case.opened"])})

    def overview(text: str) -> str:
        """The overview page without its head line (a note moves the head, and nothing else on it)."""
        return re.sub(r'<p class="head">.*?</p>', "", text, flags=re.S)

    async def rounds(client, alone: str) -> int:
        """Pages read while the head moves (a note each round: each request folds it and syncs the
        index), each checked against the cases the home holds."""
        count, end = 0, time.monotonic() + SECONDS
        while time.monotonic() < end:
            with ledger.open_ledger(home) as led:
                led.append(ledger.NewEvent(f"case:{cases[count % len(cases)]}", "note.added",
                                           {"text": f"round {count}", "author": "test"}))
            table = await (await client.get("/cases")).text()
            assert sorted(re.findall(r'class="case-link" href="/case/(\w+)"', table)) == cases, f"round {count}"
            assert overview(await (await client.get("/")).text()) == alone, f"round {count}"
            count += 1
        return count

    async def serve() -> tuple[int, int]:
        async with TestClient(TestServer(make_app(home, live=False), host="127.0.0.1")) as client:
            alone = overview(await (await client.get("/")).text())
            assert "<td>3</td>" in alone and "completed" in alone, alone
            with Rebuilding(home) as other:
                done = await rounds(client, alone)
            return done, other.rebuilds

    done, rebuilds = asyncio.run(serve())
    assert done >= 5 and rebuilds >= 5, (done, rebuilds)
