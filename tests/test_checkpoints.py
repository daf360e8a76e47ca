"""Signed checkpoints and proofs: every case of the demo home proven offline, any flipped byte
caught, and a ledger rewritten and re-hashed after a checkpoint caught by verify --against."""

from __future__ import annotations

import base64
import json
import random
import shutil
import sqlite3
from pathlib import Path

import orjson
import pytest

from evalledger import ledger
from evalledger.ledger import signed_note
from evalledger.ledger.checkpoint import make_checkpoint, record_checkpoint
from evalledger.ledger.envelope import canonical_bytes, chain_hash, line_bytes, split_line
from evalledger.ledger.proof import ProofFailed, build_bundle, check_proof

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "benchmarks" / "samples"


@pytest.fixture(scope="module")
def signed_home(tmp_path_factory):
    """The demo's samples judged offline, then a checkpoint signed with a key outside the home."""
    from evalledger.stages.dispatcher import RunSettings, run_until_idle
    from evalledger.stages.intake import ingest_path
    root = tmp_path_factory.mktemp("signed")
    home, key = root / "home", root / "keys" / "signer.key"
    key.parent.mkdir()
    with ledger.open_ledger(home) as led:
        for path in sorted(SAMPLES.glob("*.json*")):
            ingest_path(led, path)
        run_until_idle(led, RunSettings(judge_backend="offline"))
    return home, key


def _cli_keys(run_cli, key: Path, home: Path):
    done = run_cli("keygen", "--out", key, home=home)
    assert done.returncode == 0, done.stderr
    return signed_note.load_key(key), signed_note.load_key(str(key) + ".pub")


def _noted_home(run_cli, home: Path, key: Path, notes: int, prefix: str = "n") -> None:
    """A new home holding ``notes`` notes (streams ``case:<prefix>0`` ...) and a signer key for it at ``key``."""
    key.parent.mkdir(exist_ok=True)
    run_cli("init", home=home)
    for i in range(notes):
        run_cli("note", "--new-stream", f"case:{prefix}{i}", f"note {i}", home=home)
    _cli_keys(run_cli, key, home)


def test_every_case_of_the_demo_home_is_proven_offline(signed_home, run_cli, tmp_path):
    home, key = signed_home
    signer, verifier = _cli_keys(run_cli, key, home)
    witness = tmp_path / "witness.jsonl"
    done = run_cli("checkpoint", "--key", key, "--publish", witness, home=home)
    assert done.returncode == 0, done.stderr
    assert witness.read_bytes() == (home / "checkpoints.jsonl").read_bytes()
    seed_text = signer.text().split("+", 4)[4]   # the key's base64 (which may itself hold '+')
    for path in home.rglob("*"):  # the signing key never enters the home
        if path.is_file():
            assert seed_text.encode() not in path.read_bytes(), path
    with ledger.open_ledger(home, readonly=True) as led:
        cases = sorted({e.data["case_id"] for e in led.read(types=["case.opened"])})
        [stored] = list(led.read(types=["checkpoint.signed"]))
        from evalledger.ledger.checkpoint import parse_text
        checkpoint = parse_text(stored.data["note"].rpartition("\n\n")[0] + "\n")
        for case_id in cases:
            seqs = [e.seq for e in led.read(stream=f"case:{case_id}")]
            bundle = json.loads(json.dumps(build_bundle(led, seqs, stored.data["note"], checkpoint)))
            _, proven = check_proof(bundle, verifier)
            assert [p.seq for p in proven] == seqs
            assert {p.stream for p in proven} == {f"case:{case_id}"}  # only this case's events
            assert all(len(e["proof"]) <= (checkpoint.size - 1).bit_length() for e in bundle["events"])
    # and through the CLI, for one case
    out = tmp_path / "one.proof.json"
    assert run_cli("prove", cases[0][:10], "--out", out, home=home).returncode == 0
    checked = run_cli("check-proof", out, "--pubkey", str(key) + ".pub", home=tmp_path / "nowhere")
    assert checked.returncode == 0 and checked.stdout.startswith("OK "), checked.stdout


def _flip(text: str, index: int) -> str:
    """``text`` with the character at ``index`` replaced by a different one of the same kind."""
    c = text[index]
    if c in "0123456789abcdef":
        other = "0123456789abcdef"[("0123456789abcdef".index(c) + 7) % 16]
    elif c.isalnum():
        other = "Z" if c != "Z" else "Y"
    else:
        other = "#" if c != "#" else "%"
    return text[:index] + other + text[index + 1:]


def _proved_case(signed_home, run_cli, tmp_path) -> tuple[dict, object, Path]:
    """(bundle, verifier key, bundle file) of one judged case of the signed demo home, proven by
    the CLI against its checkpoint (signed first when the home has none yet)."""
    home, key = signed_home
    if not key.exists():
        _cli_keys(run_cli, key, home)
        assert run_cli("checkpoint", "--key", key, home=home).returncode == 0
    verifier = signed_note.load_key(str(key) + ".pub")
    with ledger.open_ledger(home, readonly=True) as led:
        case_id = next(e.data["case_id"] for e in led.read(types=["case.judged"]))
    out = tmp_path / "p.json"
    assert run_cli("prove", case_id, "--out", out, home=home).returncode == 0
    return orjson.loads(out.read_bytes()), verifier, out


@pytest.mark.parametrize("node", [5, None, 1.5, ["ab"], "AB" * 32, "ab" * 31, "zz" * 32, " " + "ab" * 31 + "a"])
def test_a_proof_hash_of_the_wrong_type_or_shape_is_named(signed_home, run_cli, tmp_path, node):
    """A proof hash that is not 64 lowercase hex digits is named by its place (it said
    "fromhex() argument must be str, not int", or took upper-case hex as valid)."""
    bundle, verifier, _ = _proved_case(signed_home, run_cli, tmp_path)
    bundle["events"][0]["proof"][0] = node
    with pytest.raises(ProofFailed, match=r"^events\[0\]: proof\[0\] is not a hash \(64 lowercase hex digits\)"):
        check_proof(bundle, verifier)


def test_any_flipped_byte_of_an_event_a_proof_or_the_checkpoint_fails_and_says_why(signed_home, run_cli, tmp_path):
    bundle, verifier, _ = _proved_case(signed_home, run_cli, tmp_path)
    key = signed_home[1]
    check_proof(bundle, verifier)
    rng = random.Random(20)
    targets = [("checkpoint", None, i) for i in range(len(bundle["checkpoint"]))]
    for n, entry in enumerate(bundle["events"]):
        targets += [("line", n, i) for i in rng.sample(range(len(entry["line"])), 40)]
        targets += [("proof", n, (j, i)) for j, p in enumerate(entry["proof"]) for i in rng.sample(range(64), 4)]
    reasons = set()
    for kind, n, where in targets:
        bad = json.loads(json.dumps(bundle))
        if kind == "checkpoint":
            bad["checkpoint"] = _flip(bad["checkpoint"], where)
        elif kind == "line":
            bad["events"][n]["line"] = _flip(bad["events"][n]["line"], where)
        else:
            j, i = where
            bad["events"][n]["proof"][j] = _flip(bad["events"][n]["proof"][j], i)
        with pytest.raises(ProofFailed) as caught:
            check_proof(bad, verifier)
        assert str(caught.value), (kind, n, where)
        reasons.add(str(caught.value).split(":")[0])
    assert len(targets) > 500 and len(reasons) >= 3
    # through the CLI: one flipped proof hash, exit 1 and the reason on stdout
    bad = json.loads(json.dumps(bundle))
    bad["events"][0]["proof"][0] = _flip(bad["events"][0]["proof"][0], 0)
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    done = run_cli("check-proof", tmp_path / "bad.json", "--pubkey", str(key) + ".pub")
    assert done.returncode == 1 and "events[0]" in done.stdout and "not in the checkpoint's tree" in done.stdout


def _rehashed_forgery(lines: list[bytes], seq: int) -> list[bytes]:
    """The ledger with the note at ``seq`` changed and every later hash recomputed consistently,
    its own checkpoint events dropped: what a writer who controls the files could make."""
    out, prev = [], "0" * 64
    kept = 0
    for line in lines:
        canonical, _, _ = split_line(line)
        env = orjson.loads(canonical)
        if env["type"] == "checkpoint.signed":
            continue
        kept += 1
        data = env["data"]
        if env["seq"] == seq:
            data = {**data, "text": data["text"] + " (edited later)"}
        canonical = canonical_bytes(kept, env["id"], env["stream"], env["version"], env["type"], env["schema"],
                                    orjson.dumps(data, option=orjson.OPT_SORT_KEYS),
                                    orjson.dumps(env["meta"], option=orjson.OPT_SORT_KEYS))
        hash_ = chain_hash(prev, canonical)
        out.append(line_bytes(canonical, prev, hash_))
        prev = hash_
    return out


def test_a_rewritten_and_rehashed_ledger_passes_verify_but_not_verify_against(tmp_path, run_cli):
    home, key = tmp_path / "h", tmp_path / "keys" / "signer.key"
    _noted_home(run_cli, home, key, 6)
    witness = tmp_path / "witness" / "checkpoints.jsonl"
    witness.parent.mkdir()
    assert run_cli("checkpoint", "--key", key, "--publish", witness, home=home).returncode == 0  # at seq 6
    for i in range(6, 9):
        run_cli("note", "--new-stream", f"case:n{i}", f"note {i}", home=home)
    assert run_cli("checkpoint", "--key", key, "--publish", witness, home=home).returncode == 0  # at seq 10
    assert run_cli("verify", "--against", witness, "--pubkey", str(key) + ".pub", home=home).returncode == 0
    exported = tmp_path / "export.jsonl"
    run_cli("export", "--out", exported, home=home)
    forged = tmp_path / "forged.jsonl"
    forged.write_bytes(b"".join(_rehashed_forgery(exported.read_bytes().splitlines(keepends=True), seq=3)))
    forged_home = tmp_path / "forged-home"
    assert run_cli("import", forged, home=forged_home).returncode == 0
    plain = run_cli("verify", home=forged_home)
    assert plain.returncode == 0, plain.stdout + plain.stderr  # the chain is consistent: plain verify passes
    against = run_cli("verify", "--against", witness, "--pubkey", str(key) + ".pub", home=forged_home)
    assert against.returncode == 1
    assert "does not extend the checkpoint at seq 6" in against.stdout
    assert "history was rewritten at or before seq 6; none holds" in against.stdout


def test_verify_against_says_whether_signatures_were_checked_and_refuses_what_proves_nothing(tmp_path, run_cli):
    """A forger who rehashes the ledger can rewrite a witness's copy to match it: without --pubkey,
    verify --against printed the same reassuring line as a signature-checked run. An empty copy
    passed unmentioned, --pubkey alone was ignored, and a key file that is not text was a traceback."""
    home, key = tmp_path / "h", tmp_path / "keys" / "signer.key"
    _noted_home(run_cli, home, key, 1)
    witness = tmp_path / "witness.jsonl"
    assert run_cli("checkpoint", "--key", key, "--publish", witness, home=home).returncode == 0
    unsigned = run_cli("verify", "--against", witness, home=home)
    assert unsigned.returncode == 0 and "signatures were NOT checked (give --pubkey KEY)" in unsigned.stdout
    signed = run_cli("verify", "--against", witness, "--pubkey", str(key) + ".pub", home=home)
    assert signed.returncode == 0 and "each signature checked with --pubkey" in signed.stdout
    assert "NOT checked" not in signed.stdout
    (tmp_path / "empty.jsonl").write_bytes(b"")
    empty = run_cli("verify", "--against", tmp_path / "empty.jsonl", home=home)
    assert empty.returncode == 1 and "empty.jsonl: holds no checkpoint" in empty.stdout
    alone = run_cli("verify", "--pubkey", str(key) + ".pub", home=home)
    assert alone.returncode == 2 and "give --against" in alone.stderr
    (tmp_path / "bad.pub").write_bytes(b"\xff\xfe\x00 not a key")
    for args in (("verify", "--against", witness, "--pubkey", tmp_path / "bad.pub"),
                 ("check-proof", witness, "--pubkey", tmp_path / "bad.pub")):
        bad = run_cli(*args, home=home)
        assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
        assert "bad.pub: not a key file: not UTF-8 text" in bad.stderr, bad.stderr


def test_a_kept_tree_that_does_not_match_the_events_is_never_signed(tmp_path, run_cli):
    """checkpoint signed the root of the tree the store keeps (its merkle row) without looking at
    the events: an edited or damaged row was signed and published for good, and every later check
    then said history had been rewritten. The root is now computed from the events' hashes too,
    and a mismatch signs nothing (exit 1)."""
    home, key = tmp_path / "h", tmp_path / "keys" / "signer.key"
    _noted_home(run_cli, home, key, 12)
    conn = sqlite3.connect(home / "ledger.db")
    with conn:
        conn.execute("UPDATE merkle SET size = 8, frontier = ?", (bytes(range(32)),))
    conn.close()
    refused = run_cli("checkpoint", "--key", key, "--publish", tmp_path / "witness.jsonl", home=home)
    assert refused.returncode == 1, refused.stderr
    assert "does not match the events' hashes at seq 12: nothing was signed" in refused.stderr
    assert not (home / "checkpoints.jsonl").exists() and not (tmp_path / "witness.jsonl").exists()
    with ledger.open_ledger(home, readonly=True) as led:
        assert not list(led.read(types=["checkpoint.signed"]))
    assert "table merkle" in run_cli("verify", home=home).stdout   # verify names the row


def test_prove_refuses_to_ship_an_event_edited_in_place(signed_home, run_cli, tmp_path):
    """prove shipped the stored lines without checking them: on a ledger edited in place (its
    triggers dropped, a verdict changed) it said "proof of case ..." and wrote a bundle that then
    failed every auditor's check. It checks each line as check-proof will, and writes nothing."""
    source, key = signed_home
    home = tmp_path / "home"
    shutil.copytree(source, home)
    if not key.exists():
        _cli_keys(run_cli, key, home)
    assert run_cli("checkpoint", "--key", key, home=home).returncode == 0
    with ledger.open_ledger(home, readonly=True) as led:
        judged = next(iter(led.read(types=["case.judged"])))
    conn = sqlite3.connect(home / "ledger.db")
    with conn:
        conn.execute("DROP TRIGGER events_refuse_update")
        conn.execute("UPDATE events SET data = replace(data, '\"verdict\":\"', '\"verdict\":\"x') WHERE seq = ?",
                     (judged.seq,))
    conn.close()
    out = tmp_path / "p.json"
    done = run_cli("prove", judged.data["case_id"], "--out", out, home=home)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"seq {judged.seq}: the event's bytes do not hash" in done.stderr and "evalledger verify" in done.stderr
    assert not out.exists()


def test_a_bundle_with_an_event_left_out_or_listed_twice_fails(signed_home, run_cli, tmp_path):
    """check-proof said OK to a case's bundle with a middle event dropped (a re-judgment left out)
    and to one listing an event twice: each event proved on its own. A case's bundle holds every
    version of its stream up to the checkpoint, so a gap or a repeat is a selection, and fails."""
    bundle, _, out = _proved_case(signed_home, run_cli, tmp_path)
    pub = str(signed_home[1]) + ".pub"
    assert len(bundle["events"]) >= 3
    whole = run_cli("check-proof", out, "--pubkey", pub)
    assert whole.returncode == 0 and "events after it, such as a later override, no bundle can show" in whole.stdout
    for name, events, said in [("gap.json", bundle["events"][:1] + bundle["events"][2:], "version(s) 2 missing"),
                               ("twice.json", bundle["events"] + bundle["events"][-1:], "is listed twice")]:
        (tmp_path / name).write_bytes(orjson.dumps({**bundle, "events": events}))
        done = run_cli("check-proof", tmp_path / name, "--pubkey", pub)
        assert done.returncode == 1 and said in done.stdout, done.stdout


@pytest.mark.parametrize("size, chain", [("\u0663\u0662\u0669", "ab" * 32), ("0329", "ab" * 32),
                                         ("329", "AB" * 32), ("329", "not hex")])
def test_a_signed_note_with_a_size_or_chain_no_other_reader_would_take_is_refused(tmp_path, size, chain):
    """The note parser took any Unicode digits for the size (Arabic-Indic "\u0663\u0662\u0669" read as 329),
    a leading zero, and a chain line that is not the ledger's hex: a note another reader of the
    format would refuse, even when its signature checks."""
    from evalledger.ledger.checkpoint import CheckpointError, open_checkpoint
    signer = signed_note.generate("alice")
    text = f"evalledger/0123456789abcdef\n{size}\n{base64.b64encode(bytes(32)).decode()}\nchain {chain}\ntime t\n"
    with pytest.raises(CheckpointError, match="not an evalledger checkpoint"):
        open_checkpoint(signed_note.sign(text, signer), signer.verifier)


def test_verify_against_names_a_wrong_key_and_another_ledgers_checkpoints_as_such(tmp_path, run_cli):
    """Every failing checkpoint was reported as "history was rewritten": a signature that does not
    check with the key given, and checkpoints signed for another ledger (its origin line never
    compared), sent an auditor looking for a rewrite that never happened."""
    keys = tmp_path / "keys"
    homes = {}
    for name in ("a", "b"):
        home = homes[name] = tmp_path / name
        _noted_home(run_cli, home, keys / name, 3, prefix=name)
        assert run_cli("checkpoint", "--key", keys / name, "--publish", tmp_path / f"{name}.jsonl",
                       home=home).returncode == 0
    wrong_key = run_cli("verify", "--against", tmp_path / "a.jsonl", "--pubkey", str(keys / "b") + ".pub",
                        home=homes["a"])
    assert wrong_key.returncode == 1 and "its signature does not check with that key" in wrong_key.stdout
    assert "history was rewritten" not in wrong_key.stdout
    other = run_cli("verify", "--against", tmp_path / "b.jsonl", "--pubkey", str(keys / "b") + ".pub",
                    home=homes["a"])
    assert other.returncode == 1 and "signed for another ledger" in other.stdout, other.stdout
    assert "history was rewritten" not in other.stdout


def test_keygen_refuses_a_key_inside_the_home_and_never_overwrites(tmp_path, run_cli):
    home = tmp_path / "h"
    run_cli("init", home=home)
    inside = run_cli("keygen", "--out", home / "signer.key", home=home)
    assert inside.returncode == 2 and "outside the home" in inside.stderr
    outside = tmp_path / "signer.key"
    assert run_cli("keygen", "--out", outside, home=home).returncode == 0
    again = run_cli("keygen", "--out", outside, home=home)
    assert again.returncode == 2 and "never overwritten" in again.stderr
    assert oct(outside.stat().st_mode & 0o777) == "0o600"


def test_keygen_never_replaces_a_verifier_key_already_there(tmp_path, run_cli):
    """An auditor's copy of an older verifier key at OUT.pub is neither overwritten nor paired
    with a new secret key: keygen refuses before writing anything."""
    home = tmp_path / "h"
    run_cli("init", home=home)
    key = tmp_path / "signer.key"
    older = tmp_path / "signer.key.pub"
    older.write_text("evalledger+00000000+an-older-verifier-key\n")
    refused = run_cli("keygen", "--out", key, home=home)
    assert refused.returncode == 2 and f"{older} already exists" in refused.stderr
    assert older.read_text() == "evalledger+00000000+an-older-verifier-key\n"
    assert not key.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h", "signer.key.pub"]   # no partial file left


def test_keygen_into_a_missing_folder_leaves_no_key_behind(tmp_path, run_cli):
    home = tmp_path / "h"
    run_cli("init", home=home)
    missing = tmp_path / "no-such-folder" / "signer.key"
    failed = run_cli("keygen", "--out", missing, home=home)
    assert failed.returncode == 2 and "no-such-folder" in failed.stderr and "Traceback" not in failed.stderr
    assert not missing.parent.exists()


def test_checkpoint_api_signs_what_verify_checks(tmp_path):
    signer = signed_note.generate("api-test")
    with ledger.open_ledger(tmp_path / "h") as led:
        led.append([ledger.NewEvent("case:x", "note.added", {"text": "a"})])
        checkpoint, note = make_checkpoint(led, signer, now="2026-01-01T00:00:00Z")
        record_checkpoint(led, checkpoint, note, signer.verifier)
        assert checkpoint.size == 1 and checkpoint.head == next(iter(led.read())).hash
    from evalledger.ledger.checkpoint import open_checkpoint
    assert open_checkpoint(note, signer.verifier) == checkpoint


def test_the_daemon_checkpoints_every_n_events_and_publishes(tmp_path, run_cli):
    home, key = tmp_path / "h", tmp_path / "keys" / "signer.key"
    _noted_home(run_cli, home, key, 0)
    witness = tmp_path / "witness.jsonl"
    (home / "inbox" / "cases.audit.jsonl").write_bytes((SAMPLES / "verifyfast-cases.audit.jsonl").read_bytes())
    done = run_cli("watch", "--once", "--checkpoint-key", key, "--checkpoint-events", "10", "--publish", witness,
                   "--log-format", "json", home=home)
    assert done.returncode == 0, done.stderr
    logged = [orjson.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    checkpoints = [entry for entry in logged if entry.get("event") == "checkpoint"]
    assert checkpoints, done.stderr
    with ledger.open_ledger(home, readonly=True) as led:
        stored = list(led.read(types=["checkpoint.signed"]))
        head = led.head().seq
    assert stored and stored[-1].data["size"] == head - 1  # signed the head, then appended itself
    assert witness.read_bytes() == (home / "checkpoints.jsonl").read_bytes()
    assert run_cli("verify", "--against", witness, "--pubkey", str(key) + ".pub", home=home).returncode == 0
    lonely = run_cli("watch", "--once", "--publish", witness, home=home)
    assert lonely.returncode == 2 and "need --checkpoint-key" in lonely.stderr


def test_files_an_auditor_names_that_never_end_are_refused_not_read(tmp_path, run_cli):
    """A proof bundle, key, report or checkpoints file named on the command line is read whole:
    /dev/zero, /dev/urandom or a FIFO nobody writes to never ended (check-proof /dev/zero ran until
    killed); each is now refused at once, naming the file (exit 2)."""
    import os
    home = tmp_path / "h"
    run_cli("init", home=home)
    assert run_cli("note", "--new-stream", "case:x", "a note to checkpoint", home=home).returncode == 0
    key = tmp_path / "signer.key"
    assert run_cli("keygen", "--out", key, home=home).returncode == 0
    assert run_cli("checkpoint", "--key", key, home=home).returncode == 0
    assert run_cli("report", home=home).returncode == 0
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    pub, checkpoints = f"{key}.pub", home / "checkpoints.jsonl"
    for args, named in [(("check-proof", "/dev/zero", "--pubkey", pub), "/dev/zero"),
                        (("check-proof", fifo, "--pubkey", pub), str(fifo)),
                        (("check-proof", "/dev/zero", "--pubkey", fifo), str(fifo)),
                        (("check-proof", "--report", "/dev/zero", "--checkpoints", checkpoints, "--pubkey", pub),
                         "/dev/zero"),
                        (("check-proof", "--report", home / "reports" / "index.md", "--checkpoints", fifo, "--pubkey", pub),
                         str(fifo)),
                        (("verify", "--against", "/dev/zero"), "/dev/zero"),
                        (("verify", "--against", checkpoints, "--pubkey", fifo), str(fifo)),
                        (("checkpoint", "--key", "/dev/urandom"), "/dev/urandom"),
                        (("check-proof", tmp_path, "--pubkey", pub), str(tmp_path))]:
        done = run_cli(*args, home=home, timeout=30)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert named in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)
