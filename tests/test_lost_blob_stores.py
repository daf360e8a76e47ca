"""Stores that lost their blob store, beyond SQLite: a PostgreSQL store whose ``blobs`` table was
dropped, and a JSONL ledger (an export opened as a ledger, a home's mirror) whose ``<file>.blobs``
was deleted. Every read stops at the first event that refers to a blob, naming the store, the event
and the blob (``ledger/lost_blobs.py``, as for a SQLite home without its table); ``export --out``
leaves no file; ``verify`` fails at that event. Real homes judged by the offline judge, read
through the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import cli
from evalledger import ledger
from evalledger.cli.main import main
from evalledger.ledger.blobs import BlobError
from evalledger.ledger.lost_blobs import refers_anywhere
from test_compact_rows import judged

REF = b'{"$blob":"sha256:'


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """A SQLite home judged offline, with its plain mirror (``events.jsonl`` and its blob file)."""
    return judged(tmp_path_factory.mktemp("lost") / "sqlite")


def first_reference(lines: bytes) -> tuple[int, str]:
    """(seq, stream) of the first event line whose payload refers to a blob (blob lines skipped)."""
    for line in lines.splitlines():
        event = json.loads(line)
        if "data" in event and '"$blob"' in json.dumps(event["data"]):
            return event["seq"], event["stream"]
    raise AssertionError("no event refers to a blob")


def reads_stop(target: str, where: str, seq: int, case: str, tmp_path: Path, capsys) -> None:
    """report, rebuild, export --out, history, log and replay of ``target`` each exit 2 naming
    ``where``, ``seq`` and the blob; the export leaves no file."""
    out = tmp_path / "backup.jsonl"
    commands = [["report"], ["rebuild"], ["export", "--out", str(out)], ["history", case], ["log"],
                ["replay", "--into", str(tmp_path / "replayed")]]
    for command in commands:   # in this process: an exception that is not turned into a message fails the test
        assert main(["--home", target, *command]) == 2, command
        err = capsys.readouterr().err
        assert f"{where}: seq {seq} refers to blob sha256:" in err, (command, err)
        assert "which is missing" in err and "'evalledger verify'" in err, err
    assert not out.exists() and not Path(f"{out}.blobs").exists()


def verify_fails(target: str, where: str, seq: int) -> None:
    """``evalledger verify`` (a process of its own) exits 1, its first FAILED line at ``seq``, naming ``where``."""
    done = cli("verify", home=target, timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr, (done.stdout, done.stderr)
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAILED seq ")]
    assert failed and failed[0].startswith(f"FAILED seq {seq}: {where}: "), done.stdout
    assert "is missing" in failed[0] and "sha256:" in failed[0], failed[0]


def test_a_jsonl_ledger_whose_blob_file_was_deleted_stops_every_read(home, tmp_path, capsys):
    exported = tmp_path / "export.jsonl"
    assert main(["--home", str(home), "export", "--out", str(exported)]) == 0
    seq, case = first_reference(exported.read_bytes())
    with ledger.open_ledger(exported, readonly=True) as led:   # with its blob file, it reads whole
        assert led.verify().ok and all(REF not in repr(e.data).encode() for e in led.read())
    Path(f"{exported}.blobs").unlink()
    where = f"{exported} (blob file {exported}.blobs, which this store lacks: deleted?)"
    capsys.readouterr()
    reads_stop(str(exported), where, seq, case, tmp_path, capsys)
    verify_fails(str(exported), where, seq)
    with ledger.open_ledger(exported, readonly=True) as led, pytest.raises(BlobError, match="refers to blob"):
        list(led.read(types=["judge.called"]))


def test_a_home_whose_mirror_lost_its_blob_file_fails_verify_and_its_mirror_read_alone_stops(home, tmp_path, capsys):
    copy = Path(shutil.copytree(home, tmp_path / "home"))
    mirror = copy / "events.jsonl"
    seq, case = first_reference(mirror.read_bytes())
    Path(f"{mirror}.blobs").unlink()
    # the home reads its store, not its mirror: verify names the mirror's blob file at that event
    verify_fails(str(copy), f"{mirror}.blobs", seq)
    assert main(["--home", str(copy), "history", case]) == 0
    # the mirror opened as a ledger of its own (to rebuild from it) stops, as an export does
    where = f"{mirror} (blob file {mirror}.blobs, which this store lacks: deleted?)"
    capsys.readouterr()
    reads_stop(str(mirror), where, seq, case, tmp_path, capsys)


def test_a_postgres_store_whose_blob_table_was_dropped_stops_every_read(tmp_path, capsys):
    import psycopg

    from evalledger.ledger.postgres import redact_url
    from postgres_support import fresh_store_url
    url = fresh_store_url()
    pg_home = judged(tmp_path / "pg", "--store", url)
    with ledger.open_ledger(pg_home, readonly=True) as led:
        seq, case = first_reference(b"".join(line for _, line in led.recorder.lines()))
        assert led.verify().ok
    schema = url.rsplit("schema=", 1)[1]
    with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
        conn.execute(f"DROP TABLE {schema}.blobs")
    where = f"{redact_url(url)} (table {schema}.blobs, which this store lacks: dropped?)"
    capsys.readouterr()
    reads_stop(str(pg_home), where, seq, case, tmp_path, capsys)
    verify_fails(str(pg_home), where, seq)
    assert main(["--home", str(pg_home), "status"]) == 0   # counts states only: reads no payload that lost a part
    with ledger.open_ledger(pg_home, readonly=True) as led:
        with pytest.raises(BlobError, match="refers to blob"):
            list(led.read(types=["judge.called"]))
        assert [e.seq for e in led.read(to_seq=seq - 1)] == list(range(1, seq))   # the events before it read
        _, line = next(led.recorder.lines(seq, seq))
        with pytest.raises(BlobError, match=f"seq {seq} refers to blob"):   # as stored, too: it is read no more
            led.get_stored(json.loads(line)["id"])


@pytest.mark.parametrize("chunk", [7, 8, 9, 16, 1 << 22])
def test_refers_anywhere_finds_a_reference_across_a_chunk_cut(tmp_path, chunk):
    path = tmp_path / "lines.jsonl"
    for at in range(0, 40):
        data = b"x" * at + REF + b"0" * 64 + b'"}' + b"y" * 30
        path.write_bytes(data)
        assert refers_anywhere(str(path), len(data), chunk), (at, chunk)
        assert not refers_anywhere(str(path), at + 6, chunk), (at, chunk)   # the key cut off by the size
    path.write_bytes(b'{"data":{"$lit":1}}\n' * 50)
    assert not refers_anywhere(str(path), 1000, chunk)
    dollars = b'{"text":"$5 or $x$"}\n' * 400   # so many a chunk is searched whole past them
    path.write_bytes(dollars + b'{"data":' + REF + b"0" * 64 + b'"}}\n')
    assert refers_anywhere(str(path), path.stat().st_size, chunk)
    assert not refers_anywhere(str(path), len(dollars), chunk)
