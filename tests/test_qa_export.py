"""QA: `export --out` onto the ledger's own files is refused instead of truncating the ledger."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from evalledger import ledger
from evalledger.ledger import NewEvent


def buffered_env() -> dict[str, str]:
    """The environment without PYTHONUNBUFFERED, as in a user's shell: standard output to a file is
    then block-buffered, and a short output meets a full disk only when it is flushed."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def _two_notes(run_cli, home) -> str:
    run_cli("note", "--new-stream", "case:a", "one", home=home)
    run_cli("note", "--new-stream", "case:a", "two", home=home)
    return run_cli("verify", home=home).stdout


@pytest.mark.parametrize("name", ["ledger.db", "events.jsonl"])
def test_export_onto_a_homes_store_or_mirror_is_refused_and_loses_nothing(home, run_cli, name):
    head = _two_notes(run_cli, home)
    done = run_cli("export", "--out", home / name, home=home)
    assert done.returncode == 2 and "own files" in done.stderr and "Traceback" not in done.stderr
    after = run_cli("verify", home=home)
    assert after.returncode == 0 and after.stdout == head


def test_export_of_a_jsonl_ledger_onto_itself_is_refused(tmp_path, run_cli):
    store = tmp_path / "ledger.jsonl"
    head = _two_notes(run_cli, store)
    size = store.stat().st_size
    done = run_cli("export", "--out", store, home=store)
    assert done.returncode == 2
    assert store.stat().st_size == size and run_cli("verify", home=store).stdout == head


def test_export_elsewhere_still_writes_the_exact_mirror(home, tmp_path, run_cli):
    _two_notes(run_cli, home)
    out = tmp_path / "copy.jsonl"
    assert run_cli("export", "--out", out, home=home).returncode == 0
    assert out.read_bytes() == (home / "events.jsonl").read_bytes()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("notes", [1, 400])   # one short line (written at the flush), and many chunks
def test_export_to_a_full_standard_output_says_so_and_exits_1(home, run_cli, notes):
    with ledger.open_ledger(home) as led:
        led.append([NewEvent(f"case:n{n}", "note.added", {"text": "x" * 200}) for n in range(notes)])
    head = run_cli("verify", home=home).stdout
    with open("/dev/full", "wb") as full:   # a real process whose standard output is a full device
        done = subprocess.run([sys.executable, "-m", "evalledger", "--home", str(home), "export"],
                              stdout=full, stderr=subprocess.PIPE, timeout=120, env=buffered_env())
    said = done.stderr.decode()
    assert done.returncode == 1, said
    assert "Traceback" not in said and "Exception ignored" not in said, said
    assert said.startswith("evalledger export: error: standard output: the disk is full (No space left on "
                           "device): the export written there is incomplete; the ledger is unchanged"), said
    assert "--out FILE" in said and said.count("\n") == 1, said
    assert run_cli("verify", home=home).stdout == head


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("command", [["log"], ["log", "--json"], ["status"], ["verify"], ["history", "CASE"]])
def test_any_command_whose_standard_output_is_full_names_it(home, run_cli, command):
    """Only export said so: the others reported "the disk is full", as if the ledger's own files
    had met it, with no file named (text and bytes written to standard output alike)."""
    with ledger.open_ledger(home) as led:
        led.append([NewEvent(f"case:{c}", "note.added", {"text": "y" * 300}) for c in ("n1", "n2")])
    head = run_cli("verify", home=home).stdout
    command = [part.replace("CASE", "n1") for part in command]   # the history of case n1's stream
    with open("/dev/full", "wb") as full:
        done = subprocess.run([sys.executable, "-m", "evalledger", "--home", str(home), *command],
                              stdout=full, stderr=subprocess.PIPE, timeout=120, env=buffered_env())
    said = done.stderr.decode()
    assert done.returncode == 1, said
    assert "Traceback" not in said and "Exception ignored" not in said, said
    assert said.startswith(f"evalledger {command[0]}: error: standard output: the disk is full (No space "
                           "left on device): what was written there is incomplete"), said
    assert said.count("\n") == 1, said
    assert run_cli("verify", home=home).stdout == head


def test_a_command_with_standard_output_closed_does_its_work_and_says_nothing(home):
    """A shell's ``>&-`` leaves Python no sys.stdout (None), where print() writes nothing: the
    command must still do its work and exit 0, not stop in a traceback after committing."""
    done = subprocess.run([sys.executable, "-m", "evalledger", "--home", str(home), "note", "--new-stream",
                           "case:a", "with stdout closed"], stderr=subprocess.PIPE, timeout=120,
                          env=buffered_env(), preexec_fn=lambda: os.close(1))
    assert done.returncode == 0 and not done.stderr, done.stderr.decode()
    with ledger.open_ledger(home, readonly=True) as led:
        assert [e.data["text"] for e in led.read(types=["note.added"])] == ["with stdout closed"]
