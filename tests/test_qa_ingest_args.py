"""QA: `ingest` arguments that cannot be right are refused before anything lands in the ledger."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from evalledger import ledger

SAMPLE = Path(__file__).resolve().parents[1] / "benchmarks" / "samples" / "pharmacology.benchmark.json"


def test_a_named_fifo_is_reported_not_read_forever(home, tmp_path, run_cli):
    fifo = tmp_path / "drop.json"
    os.mkfifo(fifo)
    done = run_cli("ingest", fifo, home=home, timeout=30)
    assert done.returncode == 1 and "not a regular file" in done.stdout
    assert run_cli("verify", home=home).stdout.startswith("head 0:")


def test_a_folder_holding_a_fifo_a_socket_and_a_dangling_link_names_each_skipped_and_ingests_the_rest(
        home, tmp_path, run_cli):
    """``ingest DIR`` and ``validate DIR`` passed over them in silence: a user saw nothing of a
    file they had dropped there. They are never opened (a FIFO would wait for a writer for ever)."""
    folder = tmp_path / "drop"
    folder.mkdir()
    os.mkfifo(folder / "pipe.json")
    os.symlink(tmp_path / "gone.json", folder / "dangling.json")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(folder / "sock.json"))
        (folder / SAMPLE.name).write_bytes(SAMPLE.read_bytes())
        for command in ("validate", "ingest"):
            done = run_cli(command, folder, home=home, timeout=30)
            lines = done.stdout.splitlines()
            assert done.returncode == 0 and "Traceback" not in done.stderr, (done.stdout, done.stderr)
            assert lines[:3] == [
                f"skipped  {folder / 'dangling.json'}  a symlink to {tmp_path / 'gone.json'}, which does not exist",
                f"skipped  {folder / 'pipe.json'}  a FIFO (named pipe), not a regular file: not read",
                f"skipped  {folder / 'sock.json'}  a socket, not a regular file: not read"], lines
            assert lines[3].split()[:2] == ["valid" if command == "validate" else "accepted", SAMPLE.name], lines
    with ledger.open_ledger(home, readonly=True) as led:   # the sample, once, and nothing of the others
        assert [e.data["file"] for e in led.read(types=["file.received"])] == [SAMPLE.name]


def test_ingest_of_the_inbox_names_a_fifo_it_passes_over_in_the_inbox_and_in_a_folder_of_it(home, run_cli):
    inbox = home / "inbox"
    os.mkfifo(inbox / "pipe.json")
    (inbox / "collection").mkdir()
    os.mkfifo(inbox / "collection" / "doc.json")
    os.mkfifo(inbox / ".hidden.json")   # a name the inbox ignores: ignored here too
    (inbox / SAMPLE.name).write_bytes(SAMPLE.read_bytes())
    done = run_cli("ingest", home=home, timeout=30)
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and "Traceback" not in done.stderr, (done.stdout, done.stderr)
    fifo = "a FIFO (named pipe), not a regular file: not read"
    assert lines[:2] == [f"skipped  {inbox.resolve() / 'collection' / 'doc.json'}  {fifo}",
                         f"skipped  {inbox.resolve() / 'pipe.json'}  {fifo}"], lines
    assert lines[2].split()[:2] == ["accepted", SAMPLE.name] and len(lines) == 3, lines


def test_a_max_bytes_below_one_is_a_usage_error_and_records_no_rejection(home, run_cli):
    done = run_cli("ingest", "--max-bytes", "-1", SAMPLE, home=home)
    assert done.returncode == 2 and "--max-bytes" in done.stderr
    assert run_cli("verify", home=home).stdout.startswith("head 0:")


def test_a_symlink_that_loops_or_leads_nowhere_says_so(home, tmp_path, run_cli):
    """``ls`` lists both links, so a bare "no such file" beside their names read as a bug."""
    loop, dangling = tmp_path / "loop.json", tmp_path / "dangling.json"
    os.symlink(tmp_path / "loop2.json", loop)
    os.symlink(loop, tmp_path / "loop2.json")
    os.symlink(tmp_path / "gone.json", dangling)
    for path, said in ((loop, "(a symlink loop)"),
                       (dangling, f"(a symlink to {tmp_path / 'gone.json'}, which does not exist)")):
        done = run_cli("ingest", path, home=home)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.strip() == f"evalledger ingest: error: no such file: {path} {said}", done.stderr
