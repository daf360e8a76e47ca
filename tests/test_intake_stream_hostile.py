"""Adversarial review of the streamed benchmark reader (``formats.stream``) and the spooled intake.

Seeded random documents, valid and damaged, read a window at a time must give exactly what a
whole parse gives, or say no (then intake reads the file whole and reports as before); one long
value must not be re-scanned once per window; a killed ingest leaves no temporary files behind
once intake runs again; a file written to after it was read never lands in processed/ as if it
were the bytes the ledger names.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalledger import ledger
from evalledger.stages import intake, intake_read, intake_spool
from evalledger.stages.formats.decode import loads
from evalledger.stages.formats.errors import FileRejected
from evalledger.testing.arithmetic import arithmetic_benchmark
from intake_support import streamed_document

CLI = [sys.executable, "-m", "evalledger"]

# Pieces chosen to land on window boundaries: escapes, multi-byte UTF-8, a surrogate pair, a
# string longer than the reader's margin, and the characters the reader looks for between values.
ATOMS = ["a", "é", "\u2028", "\\", '"', "\U0001F600", "x" * 70, "\u0000", "]", "}", ",", ":"]
DAMAGE = [b"NaN", b"Infinity", b"-Infinity", b'"', b"\\", b",", b"]", b"}", b"1e999", b"\xff", b"\xc3",
          b"99999999999999999999", b" x", b"\xef\xbb\xbf"]


def random_value(rng: random.Random, depth: int = 0):
    """A random JSON value: numbers at the 64-bit edges, floats, literals, odd strings, nesting."""
    kind = rng.randint(0, 9 if depth < 5 else 5)
    text = lambda: "".join(rng.choice(ATOMS) for _ in range(rng.randint(0, 6)))  # noqa: E731
    if kind == 0:
        return rng.choice([-2**63, 2**63 - 1, 0, rng.randint(-10**6, 10**6)])
    if kind == 1:
        return rng.choice([1.5, -0.0, 1e300, 1.2345678901234567e-5, 1e22])
    if kind == 2:
        return rng.choice([True, False, None])
    if kind <= 5:
        return text()
    if kind <= 7:
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {text(): random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def random_document(rng: random.Random) -> bytes:
    """A benchmark-shaped document (format first, then arrays of random items), randomly laid out,
    and in most cases damaged: bytes dropped or inserted, truncated, trailing data, a BOM, deep
    nesting, a repeated key."""
    doc = {"format": "evalledger/benchmark@1", "name": "n", "questions": [random_value(rng) for _ in range(6)]}
    if rng.random() < .5:
        doc["responses"] = [random_value(rng) for _ in range(4)]
    raw = json.dumps(doc, ensure_ascii=rng.random() < .3, indent=rng.choice([None, 0, 1, "\t"])).encode()
    raw = (b"\xef\xbb\xbf" if rng.random() < .2 else b"") + raw
    for _ in range(rng.randint(0, 3)):
        raw = damaged(rng, raw)
    return raw


def damaged(rng: random.Random, raw: bytes) -> bytes:
    """``raw`` with one random damage: a byte dropped, a token inserted, cut short, trailing data,
    nesting deeper than the limit, or a repeated key."""
    at, kind = rng.randint(0, len(raw)), rng.randint(0, 5)
    if kind == 0:
        return raw[:at] + raw[at + 1:]
    if kind == 1:
        return raw[:at] + rng.choice(DAMAGE) + raw[at:]
    if kind == 2:
        return raw[:at]
    if kind == 3:
        return raw + rng.choice([b" x", b"{}", b"\n", b"\x00"])
    if kind == 4:
        return raw.replace(b'"questions": [', b'"questions": [' + b"[" * rng.randint(60, 66), 1)
    return raw.replace(b'"name"', b'"name": 1, "name"', 1)


def parsed_whole(raw: bytes):
    """The document as intake's whole-file reader parses it, or None when it refuses it."""
    try:
        return loads(raw.removeprefix(b"\xef\xbb\xbf").decode("utf-8"))
    except (FileRejected, UnicodeDecodeError):
        return None


@pytest.mark.parametrize("seed", range(4))
def test_random_documents_stream_as_they_parse_whole_or_not_at_all(seed):
    rng = random.Random(seed)
    for _ in range(60):
        raw = random_document(rng)
        whole = parsed_whole(raw)
        for read_size in (1, 2, 3, 7, 64, 4096):
            streamed = streamed_document(io.BytesIO(raw), read_size)
            # exactly the whole parse, or no when the whole reader refuses it (a valid document
            # read as a whole would merely cost memory, and none of these needs that)
            assert json.dumps(streamed, sort_keys=True) == json.dumps(whole, sort_keys=True), (read_size, raw)


class CountedReads(io.BytesIO):
    """An in-memory file that counts the reads made of it."""

    reads = 0

    def read(self, size: int | None = -1) -> bytes:
        self.reads += 1
        return super().read(size)


@pytest.mark.parametrize("tail", [b'"]}', b""], ids=["closed", "never-closed"])
def test_one_long_value_is_not_read_again_once_per_window(tail):
    # 4 MB in one string at a 4 KB window: a fixed window re-scanned the string from its start at
    # each of ~1,000 reads (quadratic: a 200 MB string took 31 s, 1.5 s with a growing window).
    raw = b'{"format": "evalledger/benchmark@1", "questions": ["' + b"a\\\"" * (4 << 18) + tail
    fh = CountedReads(raw)
    got = streamed_document(fh, 4096)
    assert (got is None) == (tail == b"")
    if got is not None:
        assert got["questions"] == ['a"' * (4 << 18)]
    assert fh.reads < 40, f"{fh.reads} reads for one value of {len(raw)} bytes"


def leftovers(home: Path) -> list[str]:
    """The temporary spools and spill folders in the home's processed/."""
    return sorted(p.name for p in (home / "processed").glob(".sp[oi]l*-*"))


def counts(home: Path) -> tuple[int, int]:
    """(file.received, case.opened) events in the home."""
    with ledger.open_ledger(home, readonly=True) as led:
        kinds = [e.type for e in led.read(types=["file.received", "case.opened"])]
    return kinds.count("file.received"), kinds.count("case.opened")


def test_a_killed_spooled_ingest_leaves_no_temporary_files_once_intake_runs_again(tmp_path):
    source = tmp_path / "big.json"
    source.write_text(json.dumps(arithmetic_benchmark(3000, "killed")))   # ~1.7 MB: spooled
    home = tmp_path / "home"
    subprocess.run([*CLI, "--home", str(home), "init"], check=True, capture_output=True)
    child = subprocess.Popen([*CLI, "--home", str(home), "ingest", str(source)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 60
    while not any(name.startswith(".spill-") for name in leftovers(home)):   # mid-ingest: spilled
        assert child.poll() is None and time.monotonic() < end, "the ingest ended before it spilled"
        time.sleep(0.002)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert leftovers(home), "the kill left nothing behind: it did not land mid-ingest"
    assert counts(home) == (0, 0)
    again = subprocess.run([*CLI, "--home", str(home), "ingest", str(source)], capture_output=True, text=True)
    assert again.returncode == 0 and "6000 new cases" in again.stdout, again.stdout + again.stderr
    assert leftovers(home) == [] and counts(home) == (1, 6000)
    verify = subprocess.run([*CLI, "--home", str(home), "verify"], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_the_spool_of_an_ingest_still_running_is_left_alone(tmp_path):
    home = tmp_path / "home"
    subprocess.run([*CLI, "--home", str(home), "init"], check=True, capture_output=True)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (home / "processed").mkdir(exist_ok=True)
    live = home / "processed" / f".spool-{os.getpid()}-abc"     # this test's process is running
    dead = home / "processed" / f".spool-{gone.stdout.strip()}-abc"
    other = home / "processed" / ".spool-notes.txt"             # not a name intake makes
    for path in (live, dead, other):
        path.write_bytes(b"x")
    small = tmp_path / "small.json"
    small.write_text(json.dumps(arithmetic_benchmark(2, "small")))
    subprocess.run([*CLI, "--home", str(home), "ingest", str(small)], check=True, capture_output=True)
    assert live.exists() and other.exists() and not dead.exists()


def test_a_long_lived_process_looks_for_a_killed_ingests_leftovers_at_most_once_a_window(tmp_path, monkeypatch):
    monkeypatch.setattr(intake_spool, "LEFTOVERS_EVERY_SECONDS", 0.5)
    folder = tmp_path / "processed"
    folder.mkdir()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    first, second = folder / f".spool-{gone.stdout.strip()}-a", folder / f".spill-{gone.stdout.strip()}-b"
    first.write_bytes(b"x")
    intake_spool.remove_leftovers(folder)
    assert not first.exists()
    second.mkdir()
    (second / "questions.json").write_bytes(b"x")
    intake_spool.remove_leftovers(folder)   # within the window: the folder is not listed again
    assert second.exists()
    time.sleep(0.6)
    intake_spool.remove_leftovers(folder)
    assert not second.exists()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("questions", [5, 3000], ids=["in-memory", "spooled"])
@pytest.mark.parametrize("change", ["appended", "rewritten"])
def test_an_inbox_file_written_to_after_it_was_read_is_not_filed_as_what_was_read(tmp_path, questions, change):
    home = tmp_path / "home"
    led = ledger.open_ledger(home)
    inbox = home / "inbox"
    inbox.mkdir(parents=True, exist_ok=True)
    path = inbox / "late.json"
    path.write_text(json.dumps(arithmetic_benchmark(questions, "late")))
    read = intake_read.read_once(path, intake.DEFAULT_MAX_BYTES, None, home / "processed")
    # a writer still at work on the same inode, after intake's one read
    with open(path, "r+b") as fh:
        fh.seek(0, os.SEEK_END if change == "appended" else os.SEEK_SET)
        fh.write(b"\n " if change == "appended" else b" ")   # appended: still valid; rewritten: '{' lost
    try:
        result = intake._ingest_read(led, path, read, "late.json", True, intake.DEFAULT_MAX_BYTES, 100_000, None)
    finally:
        if read.spool is not None:
            read.spool.unlink(missing_ok=True)
    assert result.status == "accepted" and result.sha256 == read.sha256
    assert sha256(result.moved_to) == read.sha256, "processed/ names bytes it does not hold"
    assert path.exists(), "the changed file left the inbox without being ingested"
    changed = sha256(path)
    again = intake.ingest_path(led, path, from_inbox=True)   # ingested on its own, under its own hash
    led.close()
    assert again.sha256 == changed != read.sha256 and sha256(again.moved_to) == changed


KILLED_BETWEEN_RENAMES = """
import os, signal, sys
from evalledger import ledger
from evalledger.stages import intake, intake_read, intake_spool
real = os.replace
def replace(src, dst):   # the first of the two renames that file an inbox file away, then SIGKILL
    real(src, dst)
    if os.path.basename(str(dst)).startswith(".taking-"):
        os.kill(os.getpid(), signal.SIGKILL)
os.replace = replace
led = ledger.open_ledger(sys.argv[1])
intake.ingest_path(led, sys.argv[2], from_inbox=True)
"""


@pytest.mark.parametrize("content,command", [("accepted", "ingest"), ("rejected", "ingest"),
                                             ("accepted", "watch --once")])
def test_an_inbox_file_killed_between_its_two_renames_is_put_back_and_filed(tmp_path, content, command):
    home = tmp_path / "home"
    subprocess.run([*CLI, "--home", str(home), "init"], check=True, capture_output=True)
    raw = json.dumps(arithmetic_benchmark(4, "renamed")) if content == "accepted" else '{"questions": ['
    dropped = home / "inbox" / "bench.json"
    dropped.write_text(raw)
    child = subprocess.run([sys.executable, "-c", KILLED_BETWEEN_RENAMES, str(home), str(dropped)],
                           capture_output=True, text=True, timeout=60)
    assert child.returncode == -signal.SIGKILL, child.stderr
    hidden = [p for p in home.rglob(".taking-*")]
    assert len(hidden) == 1 and not dropped.exists(), "the kill did not land between the renames"
    again = subprocess.run([*CLI, "--home", str(home), *command.split()], capture_output=True, text=True, timeout=60)
    assert not list(home.rglob(".taking-*")), again.stdout + again.stderr
    digest = hashlib.sha256(raw.encode()).hexdigest()
    if content == "accepted":
        assert again.returncode == 0 and (home / "processed" / f"{digest}.json").read_text() == raw
        assert counts(home) == (1, 8)
    else:
        assert again.returncode == 1 and (home / "rejected" / "bench.json").read_text() == raw
        assert (home / "rejected" / "bench.json.error.txt").exists()
    assert not dropped.exists() and not list((home / "inbox").iterdir())
    verify = subprocess.run([*CLI, "--home", str(home), "verify"], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
