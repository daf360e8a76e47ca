"""QA: `watch` and `ingest` (of the inbox) leave the same temporary names alone."""

from __future__ import annotations

import pytest

TEMPORARY = ["draft.json.swp", "draft.json~", "download.json.partial", "copy.json.part", "x.json.tmp", ".hidden.json"]


@pytest.mark.parametrize("command", [["ingest"], ["watch", "--once"]])
def test_temporary_names_in_the_inbox_are_left_alone(home, run_cli, command):
    for name in TEMPORARY:
        (home / "inbox" / name).write_text("{not finished")
    done = run_cli(*command, home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in (home / "inbox").iterdir()) == sorted(TEMPORARY)
    assert list((home / "rejected").iterdir()) == []
