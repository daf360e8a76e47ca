"""The store forms of issue 15 tampered with as an attacker with the files would: the compressed
mirror edited member by member, compact rows' cells and the ``blobs`` table rewritten past the
triggers, the mirror's blob lines altered, and a tampered export imported. ``evalledger verify``
names the place (seq, member byte or table) and exits 1; nothing crashes with a traceback, hangs
or passes, and ``import`` refuses a tampered export and keeps nothing."""

from __future__ import annotations

import base64
import json
import shutil
import sqlite3
import zlib
from pathlib import Path

import pytest

from conftest import cli
from evalledger import ledger
from evalledger.cli.main import main
from evalledger.ledger.blobs import BlobError
from evalledger.ledger.mirror_gz import MemberEnd, member, scan
from test_compact_rows import judged

GZ = "events.jsonl.gz"


@pytest.fixture(scope="module")
def homes(tmp_path_factory) -> dict[str, Path]:
    """A home with the compressed mirror and compact rows, and a default one, with the same work."""
    root = tmp_path_factory.mktemp("tamper")
    return {"gzip-compact": judged(root / "gz", "--mirror", "gzip", "--rows", "compact"),
            "default": judged(root / "plain")}


def copy(home: Path, to: Path) -> Path:
    """A copy of ``home`` (checkpointed first, so ledger.db holds every event) to alter."""
    conn = sqlite3.connect(home / "ledger.db")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    shutil.copytree(home, to, ignore=shutil.ignore_patterns("ledger.db-wal", "ledger.db-shm"))
    return to


def failed_at(home: Path, where: str) -> str:
    """The line verify reports for the tampered ``home``, after checking that it exits 1 with one
    ``FAILED seq N: ...`` line that names ``where`` (a file or table), and no traceback."""
    result = cli("verify", home=home, timeout=60)
    assert result.returncode == 1 and "Traceback" not in result.stderr, (result.stdout, result.stderr[-2000:])
    lines = [line for line in result.stdout.splitlines() if line.startswith("FAILED seq ") and where in line]
    assert lines, result.stdout
    return lines[0]


def members(path: Path) -> list[tuple[int, int]]:
    """(start, end) of each gzip member of a compressed mirror, footers included."""
    return [(m.start, m.end) for m in scan(str(path)) if isinstance(m, MemberEnd)]


def tamper_sql(home: Path, *statements: tuple[str, tuple]) -> None:
    """Run SQL on ledger.db after dropping the immutability triggers, as an attacker would."""
    conn = sqlite3.connect(home / "ledger.db")
    for trigger in ("events_refuse_update", "events_refuse_delete", "blobs_refuse_update", "blobs_refuse_delete"):
        conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    for sql, params in statements:
        conn.execute(sql, params)
    conn.commit()
    conn.close()


def test_every_edit_of_the_compressed_mirror_is_named_by_seq_and_byte(homes, tmp_path):
    data = (homes["gzip-compact"] / GZ).read_bytes()
    spans = members(homes["gzip-compact"] / GZ)   # data, footer, data, footer, ...
    assert len(spans) >= 6
    (a, a_end), (b, b_end) = spans[2], spans[4]
    middle = (a + a_end) // 2
    edits = {
        "flipped byte": data[:middle] + bytes([data[middle] ^ 0x40]) + data[middle + 1:],
        "cut in a member": data[:middle],
        "member cut short": data[:middle] + data[a_end:],
        "footer dropped": data[:a_end] + data[spans[3][1]:],
        "garbage appended": data + b"garbage\n",
        "members swapped": data[:a] + data[b:b_end] + data[a_end:b] + data[a:a_end] + data[b_end:],
    }
    for name, content in edits.items():
        home = copy(homes["gzip-compact"], tmp_path / name.replace(" ", "-"))
        (home / GZ).write_bytes(content)
        line = failed_at(home, GZ)
        assert "byte " in line or "middle of a gzip member" in line, (name, line)


def test_an_altered_blob_line_inside_the_compressed_mirror_is_named(homes, tmp_path):
    home = copy(homes["gzip-compact"], tmp_path / "blobline")
    lines = list(_mirror_lines(home))
    at = next(i for i, x in enumerate(lines) if x.startswith(b'{"blob":'))
    blob = json.loads(lines[at])
    blob["text"] = blob["text"].replace("a", "b", 1) if "a" in blob["text"] else blob["text"] + " "
    lines[at] = json.dumps(blob, separators=(",", ":")).encode() + b"\n"
    last = json.loads(next(x for x in reversed(lines) if not x.startswith(b'{"blob":')))["seq"]
    (home / GZ).write_bytes(member(lines, last))   # rewritten whole, as a forger would
    line = failed_at(home, GZ)
    assert "blob" in line, line


def _mirror_lines(home: Path):
    """Every line of a compressed mirror, blob lines included."""
    import gzip
    return gzip.decompress((home / GZ).read_bytes()).splitlines(keepends=True)


@pytest.mark.parametrize("form", ["gzip-compact", "default"])
def test_rows_and_blobs_rewritten_past_the_triggers_are_named_by_seq(homes, tmp_path, form):
    source = homes[form]
    conn = sqlite3.connect(source / "ledger.db")
    seq, data = conn.execute("SELECT seq, data FROM events WHERE type = 'case.judged' ORDER BY seq LIMIT 1").fetchone()
    other, = conn.execute("SELECT data FROM events WHERE type = 'case.judged' ORDER BY seq LIMIT 1 OFFSET 1").fetchone()
    key, packed = conn.execute("SELECT key, data FROM blobs LIMIT 1").fetchone()
    conn.close()
    altered = zlib.compress(zlib.decompress(packed).replace(b"a", b"e", 1) + b" ")
    edits = {
        "data": [("UPDATE events SET data = ? WHERE seq = ?", (other, seq))],
        "text cell": [("UPDATE events SET data = ? WHERE seq = ?",
                       (data if isinstance(data, str) else '{"verdict":"pass"}', seq))] if form != "default" else [],
        "hash": [("UPDATE events SET hash = ? WHERE seq = ?", (_flip_hash(source, seq), seq))],
        "deleted": [("DELETE FROM events WHERE seq = ?", (seq,))],
        "blob": [("UPDATE blobs SET data = ? WHERE key = ?", (altered, key))],
        "blob gone": [("DELETE FROM blobs WHERE key = ?", (key,))],
        "blob garbage": [("UPDATE blobs SET data = ? WHERE key = ?", (b"\x00\x11\x22", key))],
        "blob table dropped": [("DROP TABLE blobs", ())],   # the home then looked like one made before blobs
    }
    for name, statements in edits.items():
        if not statements:
            continue
        home = copy(source, tmp_path / name.replace(" ", "-"))
        tamper_sql(home, *statements)
        line = failed_at(home, "ledger.db")
        if name.startswith("blob"):
            assert "table blobs" in line, (name, line)
        else:
            assert line.startswith(f"FAILED seq {seq}: ") and "table events" in line, (name, line)


def _flip_hash(home: Path, seq: int):
    """The stored hash cell of ``seq`` with one hex digit (or one byte, for a raw cell) changed."""
    conn = sqlite3.connect(home / "ledger.db")
    cell, = conn.execute("SELECT hash FROM events WHERE seq = ?", (seq,)).fetchone()
    conn.close()
    if isinstance(cell, bytes):
        return bytes([cell[0] ^ 1]) + cell[1:]
    return ("0" if cell[0] != "0" else "1") + cell[1:]


def test_an_altered_blob_line_of_the_plain_mirror_is_named(homes, tmp_path):
    home = copy(homes["default"], tmp_path / "plain-blobs")
    path = home / "events.jsonl.blobs"
    lines = path.read_bytes().splitlines(keepends=True)
    blob = json.loads(lines[0])
    content = zlib.decompress(base64.b64decode(blob["zlib"]))
    blob["zlib"] = base64.b64encode(zlib.compress(content.replace(b"a", b"e", 1) + b" ")).decode()
    path.write_bytes(json.dumps(blob, separators=(",", ":")).encode() + b"\n" + b"".join(lines[1:]))
    line = failed_at(home, "events.jsonl.blobs")
    assert "blob" in line, line


def _altered_blob_line(line: bytes) -> bytes:
    """A blob line (either form: ``zlib`` or ``text``) whose content no longer hashes to its key."""
    blob = json.loads(line)
    if "zlib" in blob:
        content = zlib.decompress(base64.b64decode(blob["zlib"]))
        blob["zlib"] = base64.b64encode(zlib.compress(content[:-1] + b" " + content[-1:])).decode()
    else:
        blob["text"] = blob["text"][:-1] + " " + blob["text"][-1:]
    return json.dumps(blob, separators=(",", ":")).encode() + b"\n"


@pytest.mark.parametrize("form", ["gzip-compact", "default"])
def test_import_of_a_tampered_export_refuses_and_keeps_nothing(homes, tmp_path, form):
    export = tmp_path / "export.jsonl"
    assert cli("export", "--out", export, home=homes[form]).returncode == 0
    lines = export.read_bytes().splitlines(keepends=True)
    blob_lines = Path(f"{export}.blobs").read_bytes().splitlines(keepends=True)
    at = next(i for i, x in enumerate(lines) if b'"verdict":"fail"' in x)
    edited = tmp_path / "edited.jsonl"   # one verdict changed; its blobs intact
    edited.write_bytes(b"".join(lines[:at] + [lines[at].replace(b'"verdict":"fail"', b'"verdict":"pass"', 1)]
                                + lines[at + 1:]))
    shutil.copy(f"{export}.blobs", f"{edited}.blobs")
    forged = tmp_path / "forged.jsonl"    # the events intact; a blob line altered
    shutil.copy(export, forged)
    Path(f"{forged}.blobs").write_bytes(_altered_blob_line(blob_lines[0]) + b"".join(blob_lines[1:]))
    for path, place in ((edited, f": line {at + 1} (seq "), (forged, f": line 1 of {forged}.blobs (seq 1): ")):
        into = tmp_path / f"into-{path.stem}"
        result = cli("import", path, home=into, timeout=60)
        assert result.returncode == 1 and "Traceback" not in result.stderr, (result.stdout, result.stderr[-2000:])
        assert str(path) in result.stderr and place in result.stderr and "nothing" in result.stderr, result.stderr
        verify = cli("verify", home=into)
        assert verify.returncode == 0 and "head 0:" in verify.stdout, verify.stdout   # nothing was kept


def test_report_of_a_home_with_a_cell_that_does_not_inflate_is_an_error_not_a_crash(homes, tmp_path):
    home = copy(homes["gzip-compact"], tmp_path / "garbage-cell")
    tamper_sql(home, ("UPDATE events SET data = ? WHERE seq = (SELECT MAX(seq) FROM events WHERE type = "
                      "'judge.called')", (b"\x00\x11\x22\x33",)))
    result = cli("report", home=home)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "stored data is not JSON" in result.stderr and "evalledger verify" in result.stderr


@pytest.mark.parametrize("damage", ["DELETE FROM event_rows", "DROP TABLE event_rows"])
def test_export_of_a_compact_home_whose_form_table_was_deleted_is_an_error_not_a_crash(homes, tmp_path, damage):
    # the rows were read as text: report and export crashed with a TypeError traceback
    home = copy(homes["gzip-compact"], tmp_path / "no-form")
    tamper_sql(home, (damage, ()))
    assert failed_at(home, "ledger.db").startswith("FAILED seq 1: ")
    for command in (("export", "--out", tmp_path / "out.jsonl"), ("report",), ("rebuild",), ("log",)):
        result = cli(*command, home=home)
        assert result.returncode == 2 and "Traceback" not in result.stderr, (command, result.stderr[-2000:])
        assert "seq 1: " in result.stderr and "ledger.db (table events)" in result.stderr, result.stderr
        assert "event_rows" in result.stderr and "evalledger verify" in result.stderr, result.stderr
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("damage", ["missing", "altered"])
@pytest.mark.parametrize("form", ["gzip-compact", "default"])
def test_export_of_a_home_that_lost_a_blob_stops_naming_it_and_leaves_no_file(homes, tmp_path, form, damage):
    # it exited 0 with an export that import then refused: a backup nobody could restore
    home = copy(homes[form], tmp_path / "home")
    conn = sqlite3.connect(home / "ledger.db")
    key = conn.execute("SELECT key FROM blobs ORDER BY key LIMIT 1").fetchone()[0]
    conn.close()
    if damage == "missing":
        tamper_sql(home, ("DELETE FROM blobs WHERE key = ?", (key,)))
    else:
        tamper_sql(home, ("UPDATE blobs SET data = ? WHERE key = ?", (zlib.compress(b'"something else"'), key)))
    out = tmp_path / "backup.jsonl"
    done = cli("export", "--out", out, home=home)
    assert done.returncode != 0 and "Traceback" not in done.stderr, (done.stdout, done.stderr)
    assert f"sha256:{key.hex()}" in done.stderr and "seq " in done.stderr, done.stderr
    assert not out.exists() and not Path(f"{out}.blobs").exists()
    assert cli("export", "--out", tmp_path / "whole.jsonl", home=homes[form]).returncode == 0   # the intact home exports


@pytest.mark.parametrize("form", ["gzip-compact", "default"])
def test_a_home_whose_blob_table_was_dropped_stops_every_read_that_meets_a_reference(homes, tmp_path, form, capsys):
    # report, rebuild, export, history and replay ran on the unresolved references as if they were the payload
    home = copy(homes[form], tmp_path / "home")
    tamper_sql(home, ("DROP TABLE blobs", ()))
    conn = sqlite3.connect(home / "ledger.db")
    case, = conn.execute("SELECT stream FROM events WHERE type = 'judge.called' ORDER BY seq LIMIT 1").fetchone()
    conn.close()
    out = tmp_path / "backup.jsonl"
    commands = [["report"], ["rebuild"], ["export", "--out", str(out)], ["history", case], ["log"],
                ["replay", "--into", str(tmp_path / "replayed")]]
    for command in commands:   # in this process: an exception that is not turned into a message fails the test
        assert main(["--home", str(home), *command]) == 2, command
        err = capsys.readouterr().err
        assert f"{home}/ledger.db (table blobs" in err and "refers to blob sha256:" in err, (command, err)
        assert "'evalledger verify'" in err, err
    assert not out.exists() and not Path(f"{out}.blobs").exists()
    assert main(["--home", str(home), "status"]) == 0   # counts states only: reads no payload that lost a part
    with ledger.open_ledger(home, readonly=True) as led, pytest.raises(BlobError, match="refers to blob"):
        list(led.read(types=["judge.called"]))
    # a read gives every event before the first that lost a blob (read a page at a time, it once
    # stopped at the start of that page), then stops there
    given: list[int] = []
    with ledger.open_ledger(home, readonly=True) as led, pytest.raises(BlobError) as raised:
        given.extend(event.seq for event in led.read())
    first = int(str(raised.value).split(": seq ")[1].split()[0])
    assert first > 1 and given == list(range(1, first)), (first, given[-3:])
