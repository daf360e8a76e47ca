"""QA: `log --type` with a misspelt type is a usage error, not an empty listing."""

from __future__ import annotations


def test_an_unknown_type_is_a_usage_error_naming_the_known_types(home, run_cli):
    run_cli("note", "--new-stream", "case:q1", "hello", home=home)
    done = run_cli("log", "--type", "note.add", home=home)
    assert done.returncode == 2 and done.stdout == ""
    assert "unknown event type 'note.add'" in done.stderr and "note.added" in done.stderr


def test_known_types_still_filter(home, run_cli):
    run_cli("note", "--new-stream", "case:q1", "hello", home=home)
    done = run_cli("log", "--type", "note.added", "--type", "case.judged", home=home)
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 1
