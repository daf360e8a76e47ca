"""QA: ``verify`` prints its head as SEQ:HASH, which ``--expect-head`` accepts (and nothing else); --json and findings on stdout."""

from __future__ import annotations

GENESIS = "0" * 64


def test_the_empty_ledgers_printed_head_verifies_against_itself_and_later_ledgers(home, run_cli):
    printed = run_cli("verify", home=home)
    assert printed.returncode == 0 and printed.stdout.strip() == f"head 0:{GENESIS}"
    assert run_cli("verify", "--expect-head", f"0:{GENESIS}", home=home).returncode == 0
    run_cli("note", "--new-stream", "case:q1", "later", home=home)
    later = run_cli("verify", "--expect-head", f"0:{GENESIS}", home=home)
    assert later.returncode == 0, later.stderr
    assert "is a prefix" in later.stdout


def test_a_wrong_hash_at_seq_0_is_a_finding(home, run_cli):
    wrong = run_cli("verify", "--expect-head", f"0:{'1' * 64}", home=home)
    assert wrong.returncode == 1 and "rewritten" in wrong.stdout


def test_a_head_whose_hash_is_not_hex_is_a_usage_error(home, run_cli):
    bad = run_cli("verify", "--expect-head", f"1:{'z' * 64}", home=home)
    assert bad.returncode == 2
    assert "SEQ:HASH" in bad.stderr and "Traceback" not in bad.stderr


def test_the_printed_head_line_pastes_into_expect_head_whole_as_seq_hash_or_in_a_file(home, run_cli):
    for text in ("one", "two"):
        run_cli("note", "--new-stream", "case:q1", text, home=home)
    printed = run_cli("verify", home=home)
    [line] = printed.stdout.splitlines()
    assert line.startswith("head 2:")
    run_cli("note", "--new-stream", "case:q1", "three", home=home)
    for pasted in (line.split()[1], line):
        later = run_cli("verify", "--expect-head", pasted, home=home)
        assert later.returncode == 0, later.stdout
        assert f"published head {line.split()[1]} is a prefix" in later.stdout
    listing = home.parent / "heads.txt"   # verify's printed lines, collected over time
    listing.write_text(line + "\n")
    collected = run_cli("verify", "--expect-head", listing, home=home)
    assert collected.returncode == 0 and "all 1 published heads hold" in collected.stdout


def test_verify_json_is_one_object_with_the_head_counts_and_no_findings(home, run_cli, tmp_path):
    import json

    from evalledger import ledger
    from evalledger.ledger import merkle
    run_cli("note", "--new-stream", "case:q1", "one", home=home)
    plain = json.loads(run_cli("verify", "--json", home=home).stdout)
    with ledger.open_ledger(home, readonly=True) as led:
        head = led.head()
    assert plain == {"ok": True, "head": {"seq": 1, "hash": head.hash, "text": f"1:{head.hash}"},
                     "counts": {"events": 1, "errors": 0, "warnings": 0}, "expect_head": None,
                     "published_heads": None, "read_models": None, "checkpoints": [], "merkle_root": None,
                     "findings": []}
    # With a checkpoint to prove against, verify computes the ledger's Merkle root and says so.
    key = tmp_path / "signer.key"
    assert run_cli("keygen", "--out", key, home=home).returncode == 0
    assert run_cli("checkpoint", "--key", key, home=home).returncode == 0
    done = run_cli("verify", "--json", "--projections", home=home)
    result = json.loads(done.stdout)
    assert done.returncode == 0 and result["ok"] and done.stderr == ""
    with ledger.open_ledger(home, readonly=True) as led:
        hashes = [bytes.fromhex(e.hash) for e in led.read()]
    assert result["merkle_root"] == merkle.root(hashes).hex()
    assert result["checkpoints"] == [{"source": "the ledger's own checkpoints", "checked": 1, "holds": [1],
                                      "broken": None, "reason": None, "signatures": None}]
    assert result["read_models"] == {"match": True, "differences": 0}


def test_verify_findings_go_to_stdout_as_text_and_json_with_exit_1(home, run_cli):
    import json
    import sqlite3
    for text in ("one", "two", "three"):
        run_cli("note", "--new-stream", "case:q1", text, home=home)
    conn = sqlite3.connect(home / "ledger.db", isolation_level=None)
    conn.execute("DROP TRIGGER events_refuse_update")
    conn.execute("UPDATE events SET data = '{\"author\":null,\"text\":\"edited\"}' WHERE seq = 2")
    conn.close()
    text = run_cli("verify", home=home)
    assert text.returncode == 1 and text.stderr == ""
    assert text.stdout.splitlines()[0].startswith("FAILED seq 2: ")
    assert "hash does not match the stored bytes" in text.stdout and "head 1:" in text.stdout
    as_json = run_cli("verify", "--json", home=home)
    assert as_json.returncode == 1 and as_json.stderr == ""
    result = json.loads(as_json.stdout)
    assert result["ok"] is False and result["head"]["seq"] == 1 and result["counts"]["errors"] >= 1
    chain = [f for f in result["findings"] if f["check"] == "chain"]
    assert chain[0]["level"] == "error" and chain[0]["seq"] == 2
    assert "hash does not match the stored bytes" in chain[0]["message"]
    assert any(f["level"] == "warning" and "triggers" in f["message"] for f in result["findings"])
