"""The compressed mirror against what its writer never produces: crafted files given to ``import``
(a decompression bomb, garbage, files of the wrong kind), a mirror altered member by member, cut at
any byte, or with any byte flipped, writers killed at random moments, and readers racing a writer.
Every case ends in a clear refusal or report naming the file, the place and the reason, or in a
home that reopens whole; nothing hangs or fills the memory."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import cli
from evalledger import ledger
from evalledger.ledger import NewEvent
from evalledger.ledger.blob_lines import is_blob_line
from evalledger.ledger.mirror_gz import MemberEnd, MirrorDamage, footer, member, read_lines, scan
from test_gz_mirror import judged
from viewer_support import next_event, seq_of

GZ = "events.jsonl.gz"


def small_home(folder: Path, commits: int = 6) -> Path:
    """A compressed-mirror home with ``commits`` appends of one to three notes each (Python API)."""
    home = ledger.init_home(folder, mirror="gzip")
    with ledger.open_ledger(home) as led:
        for i in range(commits):
            led.append([NewEvent(f"case:{i % 3}", "note.added", {"text": f"note {i}.{j} " + "x" * 50 * j})
                        for j in range(1 + i % 3)])
    return home


def members(path: Path) -> list[tuple[int, int]]:
    """(start, end) of every gzip member of a compressed mirror, footers included."""
    return [(m.start, m.end) for m in scan(str(path)) if isinstance(m, MemberEnd)]


def problems(home: Path) -> list[str]:
    """What ``Ledger.verify`` reports for a home (read-only: nothing is repaired)."""
    with ledger.open_ledger(home, readonly=True) as led:
        return [str(p) for p in led.verify().problems]


def stored_lines(home: Path) -> list[bytes]:
    """The lines SQLite holds, as the mirror must hold them (blob lines included)."""
    with ledger.open_ledger(home, readonly=True) as led:
        return [e.line() for e in led.read()]


def event_lines(home: Path) -> list[bytes]:
    """The event lines of the home's compressed mirror, as ``gzip`` reads the file."""
    return [x for x in gzip.decompress((home / GZ).read_bytes()).splitlines(keepends=True) if not is_blob_line(x)]


@pytest.fixture(scope="module")
def judged_home(tmp_path_factory) -> Path:
    """A compressed-mirror home whose benchmark was judged offline (its judge calls have blobs)."""
    return judged(tmp_path_factory.mktemp("hostile"), "gzip")


# --- import of crafted files ---------------------------------------------------------------------

def bomb(path: Path, gib: int = 2) -> int:
    """Write a gzip file of ~1 KB a MiB that inflates to ``gib`` GiB of one line with no newline (its
    trailer is never reached, so it holds no real CRC); returns its size in bytes."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = packer.compress(b"a" * (1 << 20)) + packer.flush(zlib.Z_FULL_FLUSH)
    block = packer.compress(b"a" * (1 << 20)) + packer.flush(zlib.Z_FULL_FLUSH)   # no back-reference to before
    with open(path, "wb") as fh:
        fh.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + block)
        for _ in range(gib * 1024 - 1):
            fh.write(block)
        fh.write(packer.flush() + b"\x00" * 8)
    return path.stat().st_size


def _limit_memory() -> None:
    """In the child: at most 1.5 GiB of address space, so a bomb inflated whole fails there."""
    resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))


def test_import_refuses_a_decompression_bomb_quickly_in_bounded_memory(tmp_path):
    size = bomb(tmp_path / "bomb.gz")
    assert size < 3 << 20   # ~2 MB on disk, 2 GiB inflated
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "evalledger", "--home", str(tmp_path / "h"), "import",
                             str(tmp_path / "bomb.gz")], capture_output=True, text=True, timeout=60,
                            preexec_fn=_limit_memory)
    assert result.returncode == 1, result.stderr[-2000:]
    assert "refusing to import" in result.stderr and "bomb.gz: at byte 0: a line longer than 268,435,456 bytes" \
        in result.stderr and "nothing was imported" in result.stderr and "Traceback" not in result.stderr
    assert time.monotonic() - started < 30
    with ledger.open_ledger(tmp_path / "h", readonly=True) as led:
        assert led.head().seq == 0 and led.verify().ok


def test_a_bomb_appended_to_a_homes_mirror_is_reported_not_inflated(tmp_path):
    home = small_home(tmp_path / "home")
    size = bomb(tmp_path / "bomb.gz")
    with open(home / GZ, "ab") as fh:   # a member with a footer that names it rightly: a writer reads it
        at = fh.tell()
        fh.write((tmp_path / "bomb.gz").read_bytes() + footer(size, len(stored_lines(home))))
    before = (home / GZ).read_bytes()
    result = subprocess.run([sys.executable, "-m", "evalledger", "--home", str(home), "verify", "--repair"],
                            capture_output=True, text=True, timeout=60, preexec_fn=_limit_memory)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert f"{home / GZ}: a line longer than 268,435,456 bytes" in result.stdout and f"(byte {at})" in result.stdout
    assert (home / GZ).read_bytes() == before   # never rewritten


def test_lines_are_bounded_and_split_one_at_a_time(tmp_path):
    path = tmp_path / "lines.gz"
    path.write_bytes(member([b"a" * 100 + b"\n"] * 3, 1) + member([b"b" * 5000 + b"\n"], 2))
    first = members(path)[2][0]   # the second data member, after the first one's footer
    lines = read_lines(str(path), max_line=101)
    assert [next(lines) for _ in range(3)] == [b"a" * 100 + b"\n"] * 3
    with pytest.raises(MirrorDamage, match=r"at byte %d: a line longer than 101 bytes" % first):
        next(lines)
    with pytest.raises(MirrorDamage, match=r"at byte %d: a line longer than 4,999 bytes" % first):
        list(read_lines(str(path), max_line=4999))
    many = tmp_path / "many.gz"   # a million short lines in one member: read lazily, line by line
    many.write_bytes(gzip.compress(b"x\n" * (1 << 20), mtime=0))
    lines = read_lines(str(many))
    assert next(lines) == b"x\n" and sum(1 for _ in lines) == (1 << 20) - 1


def test_import_of_odd_files_refuses_by_place_or_reads_them_by_content(judged_home, tmp_path):
    export = tmp_path / "export.jsonl"
    assert cli("export", "--out", export, home=judged_home).returncode == 0
    assert Path(f"{export}.blobs").exists()
    data = (judged_home / GZ).read_bytes()
    odd = {
        "gzipped.jsonl.gz": gzip.compress(export.read_bytes()),   # `gzip export.jsonl`: its blobs stay beside it
        "named.jsonl": data,                                      # a compressed mirror without .gz
        "lying.gz": data[:-42] + footer(1, 999),                  # import checks lines; footers are a writer's index
        "plain.gz": export.read_bytes(),                          # an export named .gz (with its .blobs)
        "garbage.gz": data + b"garbage after the last member\n",
        "text.gz": gzip.compress(b"hello\nworld\n"),
        "empty.gz": b"",
    }
    for name, content in odd.items():
        (tmp_path / name).write_bytes(content)
    shutil.copy(f"{export}.blobs", tmp_path / "gzipped.jsonl.blobs")
    shutil.copy(f"{export}.blobs", tmp_path / "plain.gz.blobs")
    results = {name: _import(tmp_path / name, tmp_path / f"into-{name}") for name in odd}
    events = len(export.read_bytes().splitlines())
    assert {name: results[name] for name in ("gzipped.jsonl.gz", "named.jsonl", "lying.gz", "plain.gz", "empty.gz")} \
        == {"gzipped.jsonl.gz": events, "named.jsonl": events, "lying.gz": events, "plain.gz": events, "empty.gz": 0}
    assert f"garbage.gz: at byte {len(data)}: a gzip member cannot be decompressed" in results["garbage.gz"] \
        and "not a compressed mirror; nothing was imported" in results["garbage.gz"]
    assert "text.gz: line 1 (seq 1): not an event envelope" in results["text.gz"]
    for name in ("garbage.gz", "text.gz"):
        with ledger.open_ledger(tmp_path / f"into-{name}", readonly=True) as led:
            assert led.head().seq == 0   # nothing of a refused file is kept
    refused = cli("import", tmp_path / "garbage.gz", home=tmp_path / "by-cli")   # the CLI says the same
    assert refused.returncode == 1 and results["garbage.gz"] in refused.stderr


def _import(source: Path, home: Path) -> int | str:
    """The number of events ``Ledger.import_file`` imports into a new home, or why it refused."""
    with ledger.open_ledger(ledger.init_home(home)) as led:
        try:
            return led.import_file(source)
        except ledger.LedgerError as exc:
            return str(exc)


# --- a home's mirror altered ---------------------------------------------------------------------

def test_verify_names_the_seq_and_byte_of_each_altered_member(tmp_path):
    home = small_home(tmp_path / "home")
    path = home / GZ
    data = path.read_bytes()
    m = members(path)   # data, footer, data, footer, ...
    forged_line = event_lines(home)[-1].replace(b'"text":"', b'"text":"forged ', 1)
    seq_of = {start: json.loads(gzip.decompress(data[start:end]).splitlines()[0])["seq"] for start, end in m[::2]}

    def flipped(at: int) -> bytes:
        return data[:at] + bytes([data[at] ^ 1]) + data[at + 1:]

    (a, a_end), (b, b_end) = m[2], m[4]
    cases = {
        "mtime": (flipped(a + 5), seq_of[a], f"the gzip member at byte {a} has a header the ledger never writes"),
        "swap": (data[:a] + data[b:b_end] + data[a_end:b] + data[a:a_end] + data[b_end:], seq_of[a],
                 f"holds seq {seq_of[b]} where seq {seq_of[a]} should be"),
        "footer gone": (data[:a_end] + data[m[3][1]:], seq_of[b] - 1, f"the gzip member at byte {a} has no footer"),
        "footer lies": (data[:m[3][0]] + footer(a_end - a, seq_of[b]) + data[m[3][1]:], seq_of[b] - 1,
                        f"the footer at byte {a_end} says the member before it is {a_end - a} bytes ending at "
                        f"seq {seq_of[b]}, but it is {a_end - a} bytes ending at seq {seq_of[b] - 1}"),
        "last footer gone": (data[:-42], len(stored_lines(home)), f"the last gzip member (byte {m[-2][0]}) has "
                             "no footer after it"),
        "forged": (data + member([forged_line], seq_of[m[-2][0]]), len(stored_lines(home)) + 1,
                   f"goes on: events were cut off the end of the SQLite store (truncated), or lines were added "
                   f"to the mirror (from the gzip member at byte {len(data)})"),
    }
    for name, (content, seq, reason) in cases.items():
        path.write_bytes(content)
        found = problems(home)
        assert len(found) == 1 and found[0].startswith(f"seq {seq}: ") and reason in found[0], (name, found)
    path.write_bytes(cases["swap"][0])
    result = cli("verify", home=home)
    assert result.returncode == 1 and f"FAILED seq {seq_of[a]}: {path}" in result.stdout \
        and f"(the gzip member at byte {a})" in result.stdout


def test_a_footer_naming_seq_0_is_damage_and_never_makes_the_writer_copy_everything_again(tmp_path):
    home = small_home(tmp_path / "home")
    before = (home / GZ).read_bytes() + footer(0, 0)
    (home / GZ).write_bytes(before)
    with ledger.open_ledger(home) as led:
        with pytest.raises(ledger.LedgerError, match="names seq 0.*not rewritten"):
            led.append([NewEvent("case:x", "note.added", {"text": "refused"})])
    assert (home / GZ).read_bytes() == before


def test_the_same_events_give_the_same_bytes_and_every_header_is_fixed(judged_home, tmp_path):
    export = tmp_path / "export.jsonl"
    assert cli("export", "--out", export, home=judged_home).returncode == 0
    made = []
    for name in "ab":
        home = ledger.init_home(tmp_path / name, mirror="gzip")
        with ledger.open_ledger(home) as led:
            led.import_file(export)
        made.append((home / GZ).read_bytes())
    assert made[0] == made[1]
    path = tmp_path / "a" / GZ
    starts = [start for start, _ in members(path)]
    headers = {made[0][s:s + 10] for s in starts[::2]}
    assert headers == {b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"}   # no time, no name, OS "unknown"
    own = [start for start, _ in members(judged_home / GZ)][::2]
    data = (judged_home / GZ).read_bytes()
    assert {data[s:s + 10] for s in own} == headers   # the home the run wrote, commit by commit


# --- cut at any byte, any byte flipped (hypothesis) ----------------------------------------------

@pytest.fixture(scope="module")
def cut_home(tmp_path_factory) -> Path:
    """A small compressed-mirror home whose files the property tests copy and alter."""
    return small_home(tmp_path_factory.mktemp("cuts") / "home", commits=8)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.floats(0, 1))
def test_a_mirror_cut_at_any_byte_reads_a_prefix_and_a_writer_makes_it_whole(cut_home, tmp_path, cut):
    data = (cut_home / GZ).read_bytes()
    at = int(cut * len(data))
    work = tmp_path / f"cut-{at}"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(cut_home, work)
    (work / GZ).write_bytes(data[:at])
    ends = {end for _, end in members(cut_home / GZ)}
    read: list[bytes] = []
    try:
        read.extend(read_lines(str(work / GZ)))
        assert at in ends or at == 0   # a whole file reads without error only when cut between members
    except MirrorDamage as exc:
        assert exc.torn and at not in ends and exc.offset == max(e for e in ends | {0} if e <= at)
    whole = stored_lines(cut_home)
    assert read == whole[:len(read)]
    with ledger.open_ledger(work) as led:   # a writable open cuts what a crash would leave and completes it
        assert led.verify().ok
    assert event_lines(work) == whole


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.floats(0, 1), bit=st.integers(0, 7))
def test_any_flipped_bit_that_changes_what_the_mirror_holds_is_reported(cut_home, tmp_path, where, bit):
    data = bytearray((cut_home / GZ).read_bytes())
    at = min(int(where * len(data)), len(data) - 1)
    data[at] ^= 1 << bit
    work = tmp_path / "flip"
    if not work.exists():
        shutil.copytree(cut_home, work)
    (work / GZ).write_bytes(bytes(data))
    found = problems(work)
    if found:
        assert GZ in found[0], (at, bit)
        return
    # Not reported: then the flip changed nothing the mirror holds. Deflate has bits no decoder reads
    # (the padding after a member's last block) and bytes with another encoding of the same output
    # (a changed code length of a symbol never used); a flip there gives the same lines, CRC and length.
    assert list(read_lines(str(work / GZ))) == list(read_lines(str(cut_home / GZ))), (at, bit)


# --- crashes and races with real processes -------------------------------------------------------

def _acknowledged(fd: int) -> int:
    """The last seq a killed appender said was committed (0 for none)."""
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    seqs = [int(x) for x in b"".join(chunks).split() if x.isdigit()]
    return seqs[-1] if seqs else 0


def _appender(home: Path, out: int) -> None:
    """In a forked child: append commits of one to four notes forever, writing each head's seq to
    ``out`` once ``append`` has returned (committed and mirrored)."""
    with ledger.open_ledger(home) as led:
        os.write(out, b"ready\n")
        for i in range(1_000_000):
            events = led.append([NewEvent(f"case:{i % 5}", "note.added", {"text": f"{i}.{j} " + os.urandom(1500).hex()})
                               for j in range(1 + i % 4)])
            os.write(out, b"%d\n" % events[-1].seq)


def _fork_appender(home: Path) -> tuple[int, int]:
    """(pid, read end of its pipe) of a real child process running ``_appender`` (forked: no
    interpreter start, so a few dozen kills stay fast)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child never returns into pytest
        code = 0
        try:
            os.close(read)
            _appender(home, write)
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 1
        os._exit(code)
    os.close(write)
    return pid, read


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_an_appender_killed_at_random_moments_loses_no_acknowledged_event(tmp_path, sig):
    home = ledger.init_home(tmp_path / "home", mirror="gzip")
    rng = random.Random(int(sig))
    for _ in range(15):
        pid, read = _fork_appender(home)
        assert os.read(read, 6) == b"ready\n"
        time.sleep(rng.uniform(0, 0.05))
        os.kill(pid, sig)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == sig
        acknowledged = _acknowledged(read)
        with ledger.open_ledger(home) as led:   # reopens: completes the mirror or cuts a torn append
            report = led.verify()
            assert report.ok, report.problems
            assert led.head().seq >= acknowledged
    assert event_lines(home) == stored_lines(home) and cli("verify", home=home).returncode == 0


WRITER = """
import sys, time
from evalledger import ledger
from evalledger.ledger import NewEvent
pause = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
with ledger.open_ledger(sys.argv[1]) as led:
    for i in range(400):
        led.append([NewEvent("case:w", "note.added", {"text": f"w{i}.{j}" + "y" * 300}) for j in range(1 + i % 3)])
        time.sleep(pause)
"""


def test_verify_and_export_read_whole_snapshots_while_another_process_appends(tmp_path):
    home = small_home(tmp_path / "home")
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(home)])
    try:
        rounds, seen = 0, set()
        while writer.poll() is None or rounds < 2:
            with ledger.open_ledger(home, readonly=True) as led:
                report = led.verify()
                assert report.ok, report.problems
                out = tmp_path / f"export-{rounds}.jsonl"
                count = led.export(out)
            imported = ledger.init_home(tmp_path / f"imported-{rounds}")
            with ledger.open_ledger(imported) as led:
                assert led.import_file(out) == count and led.verify().ok
            seen.add(report.head.seq)
            rounds += 1
    finally:
        assert writer.wait(timeout=120) == 0
    assert len(seen) >= 2 and event_lines(home) == stored_lines(home)


def test_the_viewers_live_tail_and_verify_page_follow_a_compressed_home_while_it_is_written(tmp_path):
    import asyncio

    from aiohttp.test_utils import TestClient, TestServer

    from evalledger.cli.viewer import make_app
    home = small_home(tmp_path / "home")

    async def watch(client):
        response = await client.get("/events")
        heads = [seq_of(await asyncio.wait_for(next_event(response), 10))]
        # paced (400 commits over 2 s or more): on a loaded machine an unpaced writer was done before
        # the tail was read again, and the tail then showed only the first and the last head
        writer = await asyncio.create_subprocess_exec(sys.executable, "-c", WRITER, str(home), "0.005")
        pages = []
        while writer.returncode is None or len(pages) < 2:
            pages.append(await (await client.get("/verify")).text())   # verify races the writer
            await asyncio.sleep(0.05)
            with contextlib.suppress(asyncio.TimeoutError):
                heads.append(seq_of(await asyncio.wait_for(next_event(response), 0.3)))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(writer.wait(), 0.01)
        final = stored_lines(home)
        while heads[-1] < len(final):   # the tail reaches the last commit
            heads.append(seq_of(await asyncio.wait_for(next_event(response), 15)))
        response.close()
        return heads, pages, writer.returncode

    async def main():
        async with TestClient(TestServer(make_app(home, token="t"), host="127.0.0.1")) as client:
            return await watch(client)
    heads, pages, code = asyncio.run(main())
    assert code == 0 and heads == sorted(heads) and heads[-1] == len(stored_lines(home)) and len(set(heads)) > 2
    assert all('id="verify-status" class="ok"' in page for page in pages), [p for p in pages if "FAILED" in p][:1]


