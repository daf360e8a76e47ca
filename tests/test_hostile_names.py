"""File names with newlines, carriage returns, ANSI escapes and bidi overrides are printed and
written escaped: by ``ingest``, in ``rejected/*.error.txt``, by ``status`` and in the watch log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalledger.cli.watch_log import Log
from evalledger.stages.printable import escape_unprintable, shown_name

HOSTILE = [
    "evil\nrejected other.json  1 error.json",       # forges an output line
    "red\x1b[31mALERT\x1b[0m.json",                     # ANSI colour sequence
    "clear\x1b]0;title\x07.json",                       # OSC sequence (sets the window title)
    "cr\rfake.json",                                    # carriage return overwrites the line
    "bidi\u202eosj.exe.json",                           # right-to-left override
    "sep\u2028line.json",                               # Unicode line separator
]
BAD = b'{"format": "evalledger/benchmark@1", "name": "x"}'


def assert_clean(text: str) -> None:
    """No character a terminal would act on, and every line starts as ingest lines start."""
    assert "\x1b" not in text and "\r" not in text and "\u202e" not in text and "\u2028" not in text
    assert "\x07" not in text


@pytest.mark.parametrize("name", HOSTILE)
def test_ingest_output_and_error_note_escape_the_file_name(home, run_cli, name):
    path = home / "inbox" / name
    path.write_bytes(BAD)
    done = run_cli("ingest", home=home)
    assert done.returncode == 1, done.stderr
    assert_clean(done.stdout)
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"rejected {shown_name(name)}  ")
    assert all(line.startswith("    ") for line in lines[1:]), lines   # no forged "rejected ..." line
    [note] = (home / "rejected").glob("*.error.txt")
    text = note.read_text(encoding="utf-8")
    assert_clean(text)
    note_lines = text.splitlines()
    assert note_lines[0] == f"{shown_name(name)}: rejected (sha256 {note_lines[0].split('sha256 ')[1]}"
    assert all(line.startswith(shown_name(name) + ": ") for line in note_lines)
    status = run_cli("status", home=home)
    assert status.returncode == 0 and shown_name(name) in status.stdout
    assert_clean(status.stdout)


def test_a_name_on_the_command_line_is_escaped_too(home, run_cli, tmp_path):
    path = tmp_path / "two\nlines.json"
    path.write_bytes(BAD)
    done = run_cli("ingest", path, home=home)
    assert done.stdout.splitlines()[0].startswith("rejected 'two\\nlines.json'  ")


def test_the_watch_log_escapes_names_in_text_and_json(tmp_path):
    for fmt in ("text", "json"):
        log_path = tmp_path / f"log.{fmt}"
        with log_path.open("w", encoding="utf-8") as stream:
            log = Log(fmt, stream)
            for name in HOSTILE + ["plain.json"]:
                log("ingested", file=name, status="rejected")
        text = log_path.read_text(encoding="utf-8")
        assert_clean(text)
        assert len(text.split("\n")) == len(HOSTILE) + 2   # one line per record, then the final newline
        if fmt == "json":
            assert [json.loads(line)["file"] for line in text.splitlines()] == HOSTILE + ["plain.json"]


@given(st.text(max_size=40))
def test_escaped_text_is_printable_and_decodes_back(text):
    escaped = escape_unprintable(text)
    assert escaped.isprintable()
    if "\\" not in text and '"' not in text:   # then the escapes alone are JSON string syntax
        assert json.loads(f'"{escaped}"') == text
    shown = shown_name(text)
    assert shown.isprintable() and (shown == text or shown == repr(text))


LONG_NAMES = ["x" * 250 + ".json",            # 255 bytes, the most a file system takes
              "é" * 124 + ".jsonl"]            # 254 bytes of two-byte characters


@pytest.mark.parametrize("command", [("ingest",), ("watch", "--once")])
@pytest.mark.parametrize("name", LONG_NAMES)
def test_a_rejected_file_whose_name_leaves_no_room_for_its_note_is_filed_all_the_same(home, run_cli, name,
                                                                                       command):
    """``<name>.error.txt`` of a 255-byte name is over the file system's limit: the file used to stay
    in the inbox for good, rejected again at every pass (every rescan of the daemon), never filed."""
    inbox, rejected = home / "inbox", home / "rejected"
    for attempt, body in enumerate([BAD, BAD + b" "]):   # the second meets its first's name taken
        (inbox / name).write_bytes(body)
        done = run_cli(*command, home=home)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "filing it away failed" not in done.stdout + done.stderr
        assert not list(inbox.iterdir()), "the rejected file left the inbox"
        files = sorted(p for p in rejected.iterdir() if not p.name.endswith(".error.txt"))
        assert len(files) == attempt + 1 and body in {p.read_bytes() for p in files}
        for path in files:   # its own name, or as much of it as fits beside its hash and format
            assert path.name.startswith(name[:50]) and path.suffix == Path(name).suffix
            note = path.with_name(path.name + ".error.txt").read_text(encoding="utf-8")
            assert note.startswith(f"{name}: rejected (sha256 "), note
