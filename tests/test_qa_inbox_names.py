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


@pytest.mark.parametrize("command", [["ingest"], ["watch", "--once"]])
def test_a_symlink_in_the_inbox_is_left_alone_by_both(home, tmp_path, run_cli, command):
    target = tmp_path / "elsewhere.json"
    target.write_text('{"format": "evalledger/benchmark@1"}')
    (home / "inbox" / "link.json").symlink_to(target)
    done = run_cli(*command, home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (home / "inbox" / "link.json").is_symlink()
    assert run_cli("verify", home=home).stdout.startswith("head 0:")
