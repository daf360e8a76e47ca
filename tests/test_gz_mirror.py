"""The compressed mirror (``init --mirror gzip``): a home that keeps ``events.jsonl.gz`` instead of
``events.jsonl`` and its ``.blobs`` file. It holds every line an export holds, ``zcat`` reads it,
verify checks every line and blob of it and names the damage, a writable open completes it after a
crash, and an export, an import or the file itself rebuild a home with byte-identical reports.
Homes made with the plain mirror are untouched."""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import cli
from evalledger import ledger
from evalledger.ledger import NewEvent
from evalledger.ledger.blob_lines import is_blob_line, parse_blob_line
from evalledger.ledger.mirror_gz import footer, member

CASES = 8


def judged(folder: Path, mirror: str) -> Path:
    """A home made by ``evalledger init --mirror MIRROR`` in ``folder``, its benchmark judged offline."""
    folder.mkdir(parents=True, exist_ok=True)
    home = folder / "home"
    made = cli("init", "--mirror", mirror, home=home)
    assert made.returncode == 0, made.stderr
    source = folder / "bench.json"
    source.write_text(json.dumps(_benchmark()))
    for args in (("ingest", source), ("run", "--judge", "offline")):
        result = cli(*args, home=home)
        assert result.returncode == 0, result.stdout + result.stderr
    return home


def _benchmark() -> dict:
    from evalledger.testing.arithmetic import arithmetic_benchmark
    return arithmetic_benchmark(CASES // 2, "gz-mirror")


@pytest.fixture(scope="module")
def homes(tmp_path_factory) -> tuple[Path, Path]:
    """(a home with the compressed mirror, the same work in a home with the plain one)."""
    root = tmp_path_factory.mktemp("gz")
    return judged(root / "gz", "gzip"), judged(root / "plain", "jsonl")


def copy_home(home: Path, to: Path) -> Path:
    """A copy of the home's ledger files (ledger.db checkpointed, and its mirror) in ``to``."""
    to.mkdir()
    with ledger.open_ledger(home) as led:   # a writable open checkpoints nothing: copy what is on disk
        led.recorder.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for name in ("ledger.db", "events.jsonl.gz"):
        (to / name).write_bytes((home / name).read_bytes())
    for name in ("inbox", "processed", "rejected", "reports"):
        (to / name).mkdir()
    return to


def mirror_lines(home: Path) -> list[bytes]:
    """Every line of the home's compressed mirror, as ``gzip`` reads the file."""
    return gzip.decompress((home / "events.jsonl.gz").read_bytes()).splitlines(keepends=True)


def write_mirror(home: Path, lines: list[bytes]) -> None:
    """Rewrite the compressed mirror as one append holding ``lines`` (as a forger with the file would)."""
    last = next(line for line in reversed(lines) if not is_blob_line(line))
    (home / "events.jsonl.gz").write_bytes(member(lines, json.loads(last)["seq"]))


def reports(home: Path) -> dict[str, str]:
    """sha256 of every file ``evalledger report`` writes, by path under reports/."""
    result = cli("report", home=home)
    assert result.returncode == 0, result.stderr
    root = home / "reports"
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def failed(result, seq: int, reason: str) -> bool:
    """verify exited 1 naming ``seq`` in events.jsonl.gz with ``reason`` in the same line."""
    return result.returncode == 1 and any(
        line.startswith(f"FAILED seq {seq}: ") and "events.jsonl.gz" in line and reason in line
        for line in result.stdout.splitlines())


def test_a_gzip_home_keeps_only_the_compressed_mirror_and_it_holds_what_an_export_holds(homes, tmp_path):
    gz, plain = homes
    assert not (gz / "events.jsonl").exists() and not (gz / "events.jsonl.blobs").exists()
    out = tmp_path / "export.jsonl"
    assert cli("export", "--out", out, home=gz).returncode == 0
    lines = mirror_lines(gz)
    assert [x for x in lines if not is_blob_line(x)] == out.read_bytes().splitlines(keepends=True)
    blobs = [parse_blob_line(x, "mirror")[:2] for x in lines if is_blob_line(x)]
    assert set(blobs) == {parse_blob_line(x, "export")[:2] for x in Path(f"{out}.blobs").read_bytes().splitlines()}
    assert all(b'"text":' in x for x in lines if is_blob_line(x))   # kept as text: gzip compresses it
    unzipped = subprocess.run(["gzip", "-dc", str(gz / "events.jsonl.gz")], capture_output=True, check=True)
    assert unzipped.stdout == b"".join(lines)   # the footers are empty members: zcat reads past them
    plain_bytes = sum((plain / n).stat().st_size for n in ("events.jsonl", "events.jsonl.blobs"))
    assert (gz / "events.jsonl.gz").stat().st_size * 3 < plain_bytes
    assert cli("verify", home=gz).returncode == 0


def test_export_import_and_the_mirror_itself_rebuild_a_home_with_byte_identical_reports(homes, tmp_path):
    gz, _ = homes
    out = tmp_path / "export.jsonl"
    assert cli("export", "--out", out, home=gz).returncode == 0
    assert cli("import", out, home=tmp_path / "imported").returncode == 0
    from_mirror = cli("import", gz / "events.jsonl.gz", home=tmp_path / "rebuilt")
    assert from_mirror.returncode == 0, from_mirror.stderr
    expected = reports(gz)
    assert expected and reports(tmp_path / "imported") == expected == reports(tmp_path / "rebuilt")


def test_verify_names_an_edited_line_a_damaged_member_and_a_bad_or_missing_blob(homes, tmp_path):
    gz, _ = homes
    lines = mirror_lines(gz)
    events = [n for n, x in enumerate(lines) if not is_blob_line(x)]
    home = copy_home(gz, tmp_path / "edited")
    edited = list(lines)
    edited[events[2]] = edited[events[2]].replace(b'"version":', b'"version": ', 1)
    write_mirror(home, edited)
    assert failed(cli("verify", home=home), 3, "")
    home = copy_home(gz, tmp_path / "flipped")
    data = bytearray((home / "events.jsonl.gz").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (home / "events.jsonl.gz").write_bytes(bytes(data))
    assert "FAILED seq" in cli("verify", home=home).stdout and "events.jsonl.gz" in cli("verify", home=home).stdout
    first_blob = next(n for n, x in enumerate(lines) if is_blob_line(x))
    user = next(n for n in events if n > first_blob)
    seq = json.loads(lines[user])["seq"]
    record = json.loads(lines[first_blob])
    record["text"] = json.loads(next(x for x in lines[first_blob + 1:] if is_blob_line(x)))["text"]
    home = copy_home(gz, tmp_path / "swapped")
    write_mirror(home, lines[:first_blob] + [json.dumps(record, separators=(",", ":")).encode() + b"\n"]
                 + lines[first_blob + 1:])
    assert failed(cli("verify", home=home), seq, "does not hash to its key")
    home = copy_home(gz, tmp_path / "dropped")
    write_mirror(home, lines[:first_blob] + lines[first_blob + 1:])
    assert failed(cli("verify", home=home), seq, "which no line before it holds")


def test_a_torn_or_lost_append_is_reported_then_completed_and_a_forged_one_is_never_rewritten(homes, tmp_path):
    gz, _ = homes
    whole = mirror_lines(gz)
    home = copy_home(gz, tmp_path / "torn")
    data = (home / "events.jsonl.gz").read_bytes()
    (home / "events.jsonl.gz").write_bytes(data[:-60])   # a crash in the middle of the last append
    result = cli("verify", home=home)
    assert result.returncode == 1 and "ends in the middle of a gzip member" in result.stdout
    assert (home / "events.jsonl.gz").read_bytes() == data[:-60]   # verify reports, never repairs
    assert cli("verify", "--repair", home=home).returncode == 0
    assert [x for x in mirror_lines(home) if not is_blob_line(x)] == [x for x in whole if not is_blob_line(x)]
    assert cli("verify", home=home).returncode == 0

    home = copy_home(gz, tmp_path / "behind")   # a crash between a commit and its mirror write
    last = data.rfind(b"\x1f\x8b\x08\x04\x00\x00\x00\x00\x00\xff\x14\x00EL", 0, len(data) - 42)
    (home / "events.jsonl.gz").write_bytes(data[:last + 42])
    head = ledger.open_ledger(home, readonly=True)
    try:
        problems = head.verify().problems
    finally:
        head.close()
    assert problems and "crash between commit and mirror write" in str(problems[0])
    with ledger.open_ledger(home) as led:   # a writable open completes it; appends go on
        led.append([NewEvent("case:x", "note.added", {"text": "after"})])
        assert led.verify().ok
    assert mirror_lines(home)[-1].startswith(b'{"data":{"author":null,"text":"after"}')

    home = copy_home(gz, tmp_path / "unfooted")   # a crash after the data member, before its footer
    (home / "events.jsonl.gz").write_bytes(data[:-42])
    with ledger.open_ledger(home) as led:
        assert led.verify().ok and (home / "events.jsonl.gz").read_bytes() == data

    home = copy_home(gz, tmp_path / "garbage")   # bytes after the last append that no crash leaves
    (home / "events.jsonl.gz").write_bytes(data + b"something else")
    with ledger.open_ledger(home) as led:
        with pytest.raises(ledger.LedgerError, match="not an interrupted append.*not rewritten"):
            led.append([NewEvent("case:x", "note.added", {"text": "refused"})])
    assert (home / "events.jsonl.gz").read_bytes() == data + b"something else"

    home = copy_home(gz, tmp_path / "forged")   # a last append that SQLite does not hold
    forged = whole[-1].replace(b'"version":', b'"version": ', 1)
    (home / "events.jsonl.gz").write_bytes(data + member([forged], json.loads(whole[-1])["seq"]))
    before = (home / "events.jsonl.gz").read_bytes()
    with ledger.open_ledger(home) as led:
        with pytest.raises(ledger.LedgerError, match="not rewritten"):
            led.append([NewEvent("case:x", "note.added", {"text": "refused"})])
    assert (home / "events.jsonl.gz").read_bytes() == before


def test_a_plain_home_keeps_its_mirror_and_cannot_be_switched(homes, tmp_path):
    _, plain = homes
    before = {p.name: p.read_bytes() for p in plain.iterdir() if p.name.startswith("events.jsonl")}
    assert set(before) == {"events.jsonl", "events.jsonl.blobs"}
    result = cli("init", "--mirror", "gzip", home=plain)
    assert result.returncode != 0 and "plain mirror" in result.stderr
    assert cli("verify", home=plain).returncode == 0
    with ledger.open_ledger(plain) as led:
        assert led.verify().ok
    assert {p.name: p.read_bytes() for p in plain.iterdir() if p.name.startswith("events.jsonl")} == before
    assert not (plain / "events.jsonl.gz").exists()


def test_the_footer_is_an_empty_gzip_member():
    assert gzip.decompress(footer(123, 45)) == b""
    assert gzip.decompress(member([b"a\n", b"b\n"], 2)) == b"a\nb\n"


def test_migrate_moves_a_plain_home_to_the_compressed_mirror_and_records_it(homes, tmp_path):
    _, plain = homes
    with ledger.open_ledger(plain, readonly=True) as led:
        head = led.head()
    target = tmp_path / "migrated"
    result = cli("migrate", "--to", target, "--mirror", "gzip", home=plain)
    assert result.returncode == 0, result.stderr
    assert (target / "events.jsonl.gz").exists() and not (target / "events.jsonl").exists()
    assert cli("verify", "--expect-head", f"{head.seq}:{head.hash}", home=target).returncode == 0
    with ledger.open_ledger(target, readonly=True) as led:
        [migrated] = led.read(types="store.migrated")
        assert (migrated.data["mirror"], migrated.data["source_head_hash"]) == ("gzip", head.hash)
    assert [x for x in mirror_lines(target) if not is_blob_line(x)][:head.seq] == \
        (plain / "events.jsonl").read_bytes().splitlines(keepends=True)


def test_a_replay_of_a_compressed_home_is_compressed_too(homes, tmp_path):
    gz, plain = homes
    for source, name in ((gz, "events.jsonl.gz"), (plain, "events.jsonl")):
        target = tmp_path / source.parent.name
        result = cli("replay", "--into", target, home=source)
        assert result.returncode == 0, result.stdout + result.stderr
        assert {p.name for p in target.iterdir() if p.name.startswith("events.jsonl")} <= {name, f"{name}.blobs"}
        assert (target / name).exists() and cli("verify", home=target).returncode == 0


WRITER = """
import sys
from evalledger import ledger
from evalledger.ledger import NewEvent
with ledger.open_ledger(sys.argv[1]) as led:
    for i in range(150):
        led.append([NewEvent("case:" + sys.argv[2], "note.added", {"text": f"n{i}.{j}"}) for j in range(1 + i % 3)])
"""


def test_writers_in_several_processes_keep_the_compressed_mirror_whole(tmp_path):
    home = tmp_path / "home"
    assert cli("init", "--mirror", "gzip", home=home).returncode == 0
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(home), name]) for name in "abc"]
    assert [w.wait(timeout=120) for w in writers] == [0, 0, 0]
    assert cli("verify", home=home).returncode == 0
    with ledger.open_ledger(home, readonly=True) as led:
        assert mirror_lines(home) == [e.line() for e in led.read()] and led.head().seq == 900
