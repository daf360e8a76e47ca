"""Intake from anywhere: two ``watch`` daemons (two homes, two inboxes, one PostgreSQL store) given
the same files at once register each once; the files' bytes live in the store, content-addressed,
so a home that never saw a file opens any case's source (``evalledger source``).

Needs a server: EVALLEDGER_TEST_PG (``eval "$(bash .ci/start-postgres)"``).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from evalledger import ledger
from evalledger.cli.main import main
from evalledger.ledger.postgres import connect, split_store_url
from evalledger.stages.intake import ingest_path
from postgres_support import fresh_store_url, postgres_home
from watch_support import benchmark_file, evalledger, start_watch, wait_for

FILES = 4


def started(log: Path) -> bool:
    """True once the daemon logged that it started."""
    return log.exists() and b'"started"' in log.read_bytes()


def test_two_daemons_given_the_same_files_register_each_once_and_any_home_opens_the_source(tmp_path):
    store = fresh_store_url()
    homes = [postgres_home(tmp_path / f"machine{n}", store) for n in range(2)]
    reader = postgres_home(tmp_path / "elsewhere", store)   # never sees a file
    logs = [tmp_path / f"watch{n}.log" for n in range(2)]
    daemons = [start_watch(home, "--rescan-seconds", "300", "--log-format", "json",
                           log_path=log) for home, log in zip(homes, logs)]
    contents = [benchmark_file(i) for i in range(FILES)]
    try:
        assert wait_for(lambda: all(started(log) for log in logs), 60), [log.read_text() for log in logs]
        for i, content in enumerate(contents):   # each file lands in both inboxes at the same moment
            for home in homes:
                (home / "inbox" / f".b{i}.part").write_bytes(content)
            for home in homes:
                os.rename(home / "inbox" / f".b{i}.part", home / "inbox" / f"b{i}.json")
        assert wait_for(lambda: not any(any((h / "inbox").iterdir()) for h in homes), 60), "the inboxes did not empty"
        with ledger.open_ledger(reader, readonly=True) as led:
            assert wait_for(lambda: sum(1 for _ in led.read(types=["case.judged"])) == FILES * 8, 60)
    finally:
        for daemon in daemons:
            daemon.terminate()
        for daemon in daemons:
            daemon.wait(timeout=60)
    for log in logs:   # neither daemon failed a batch (a lost race would show here)
        assert b"batch_failed" not in log.read_bytes(), log.read_text()

    shas = {hashlib.sha256(c).hexdigest() for c in contents}
    with ledger.open_ledger(reader, readonly=True) as led:
        received = Counter(e.data["sha256"] for e in led.read(types=["file.received"]))
        registered = Counter(e.data["name"] for e in led.read(types=["benchmark.registered"]))
        opened = [e.data["case_id"] for e in led.read(types=["case.opened"])]
        assert led.verify().ok
    assert received == Counter(shas)                                 # each file registered once
    assert registered == Counter(f"bench-{i}" for i in range(FILES))
    assert len(opened) == len(set(opened)) == FILES * 8
    url, schema = split_store_url(store)
    conn = connect(url)
    try:
        rows = conn.execute(f"SELECT sha256, size FROM {schema}.files").fetchall()
    finally:
        conn.close()
    assert sorted(rows) == sorted((hashlib.sha256(c).hexdigest(), len(c)) for c in contents)

    # A home that never saw the files opens a case's source from the store, byte for byte.
    with ledger.open_ledger(reader, readonly=True) as led:
        case = next(e for e in led.read(types=["case.opened"]) if e.data["source"]["file"] == "b2.json")
    shown = evalledger(reader, "source", case.data["case_id"][:12])
    assert shown.stdout.encode() == contents[2]
    evalledger(reader, "source", case.data["case_id"], "--out", str(tmp_path / "copy.json"))
    assert (tmp_path / "copy.json").read_bytes() == contents[2]


def test_a_home_of_its_own_opens_the_source_from_processed_and_says_when_it_is_gone(tmp_path, capsysbinary):
    home = ledger.init_home(tmp_path / "h")
    content = benchmark_file(3)
    (tmp_path / "b.json").write_bytes(content)
    with ledger.open_ledger(home) as led:
        assert ingest_path(led, tmp_path / "b.json").status == "accepted"
        case_id = next(led.read(types=["case.opened"])).data["case_id"]
    result = subprocess.run([sys.executable, "-m", "evalledger", "--home", str(home), "source", case_id],
                            capture_output=True, timeout=60)
    assert result.returncode == 0 and result.stdout == content

    def source(*args: str) -> tuple[int, str]:
        code = main(["--home", str(home), "source", *args])
        return code, capsysbinary.readouterr().err.decode()

    for path in (home / "processed").iterdir():
        path.write_bytes(b"changed")
    code, err = source(case_id)
    assert code == 2 and "no longer hashes" in err
    for path in (home / "processed").iterdir():
        path.unlink()
    code, err = source(case_id)
    assert code == 1 and "neither in the store nor in this home's processed/" in err
    code, err = source("zzzz")
    assert code == 2 and "no case 'zzzz'" in err


@pytest.fixture(autouse=True)
def _server_needed(request):
    if request.node.name.startswith("test_a_home"):
        return
    from postgres_support import pg_url
    pg_url()
