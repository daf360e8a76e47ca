"""QA: ``verify --expect-head`` accepts exactly the heads verify prints, and nothing else."""

from __future__ import annotations

GENESIS = "0" * 64


def test_the_empty_ledgers_printed_head_verifies_against_itself_and_later_ledgers(home, run_cli):
    printed = run_cli("verify", home=home)
    assert printed.returncode == 0 and printed.stdout.strip() == f"seq 0 {GENESIS}"
    assert run_cli("verify", "--expect-head", f"0:{GENESIS}", home=home).returncode == 0
    run_cli("note", "--new-stream", "case:q1", "later", home=home)
    later = run_cli("verify", "--expect-head", f"0:{GENESIS}", home=home)
    assert later.returncode == 0, later.stderr
    assert "is a prefix" in later.stdout


def test_a_wrong_hash_at_seq_0_is_a_finding(home, run_cli):
    wrong = run_cli("verify", "--expect-head", f"0:{'1' * 64}", home=home)
    assert wrong.returncode == 1 and "rewritten" in wrong.stderr


def test_a_head_whose_hash_is_not_hex_is_a_usage_error(home, run_cli):
    bad = run_cli("verify", "--expect-head", f"1:{'z' * 64}", home=home)
    assert bad.returncode == 2
    assert "SEQ:HASH" in bad.stderr and "Traceback" not in bad.stderr
