"""Checkpoint and proof commands: keygen, checkpoint, prove, check-proof."""

from __future__ import annotations

import os
import sys
import urllib.request
from pathlib import Path

import orjson

from evalledger.cli.errors import UsageError
from evalledger.cli.given_files import regular_file
from evalledger.cli.out_file import write_out
from evalledger.ledger.whole_files import synced, write_whole


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def cmd_keygen(args) -> int:
    """Write a new Ed25519 signer key (mode 0600) and its verifier key beside it (``.pub``)."""
    from evalledger import ledger
    from evalledger.ledger import signed_note
    out = Path(args.out)
    home = Path(args.home or ledger.default_home())
    if ledger.is_home(home) and _inside(out, home):
        raise UsageError(f"{out}: the signing key must live outside the home ({home}): whoever writes the "
                         "ledger must not be able to read the key beside it")
    pub = out.with_name(out.name + ".pub")
    for path in (out, pub):   # an auditor's copy of an older verifier key is not replaced either
        if path.exists() or path.is_symlink():
            raise UsageError(f"{path} already exists; choose another --out (a key is never overwritten)")
    try:
        signer = signed_note.generate(args.name)
    except signed_note.NoteError as exc:
        raise UsageError(str(exc)) from None
    # The verifier key first, whole or not at all: a signer key is never left without its verifier.
    write_whole(pub, (signer.verifier.text() + "\n").encode())
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except BaseException:
        pub.unlink(missing_ok=True)
        raise
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write((signer.text() + "\n").encode())
            synced(handle)
    except BaseException:   # half a secret key is no key: neither file stays
        out.unlink(missing_ok=True)
        pub.unlink(missing_ok=True)
        raise
    print(f"signer key {out} (keep it secret, outside the home)")
    print(f"verifier key {pub}: {signer.verifier.text()}")
    return 0


def publish(note: str, line: bytes, target: str) -> str:
    """Copy a checkpoint to ``target``: POST the note to an http(s) URL, or append the line to a file."""
    if target.startswith(("http://", "https://")):
        request = urllib.request.Request(target, data=note.encode(), method="POST",
                                         headers={"Content-Type": "text/plain; charset=utf-8"})
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (the user's own URL)
            return f"{target} (HTTP {response.status})"
    with open(target, "ab") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())
    return target


def load_signer(path: str):
    """The signer key at ``path``; a usage error naming the file when it cannot sign."""
    from evalledger.ledger import signed_note
    try:
        signer = signed_note.load_key(regular_file(path))
    except (OSError, signed_note.NoteError) as exc:
        raise UsageError(f"{path}: {exc}") from None
    if not isinstance(signer, signed_note.Signer):
        raise UsageError(f"{path}: a verifier key cannot sign; give the signer key keygen wrote")
    return signer


def cmd_checkpoint(args) -> int:
    """Sign the ledger's head (seq, chain hash, Merkle root, time); append it; publish copies."""
    from evalledger.cli.ledger_commands import open_existing
    from evalledger.ledger import checkpoint as cps
    signer = load_signer(args.key)
    with open_existing(args) as led:
        try:
            checkpoint, note = cps.make_checkpoint(led, signer)
        except cps.TreeMismatch as exc:   # a finding about the store, not a usage error
            print(f"evalledger checkpoint: error: {exc}", file=sys.stderr)
            return 1
        except cps.CheckpointError as exc:
            raise UsageError(str(exc)) from None
        path = cps.record_checkpoint(led, checkpoint, note, signer.verifier)
    print(f"checkpoint seq {checkpoint.size}:{checkpoint.head} root {checkpoint.root.hex()}")
    if path is not None:
        print(f"  appended to {path}")
    line = cps.checkpoint_line(checkpoint, note)
    failed = 0
    for target in args.publish or []:
        try:
            print(f"  published to {publish(note, line, target)}")
        except OSError as exc:
            print(f"  not published to {target}: {exc}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


def cmd_prove(args) -> int:
    """Write a bundle proving one case's events against a signed checkpoint."""
    from evalledger.cli.ledger_commands import case_or_usage_error, open_existing
    from evalledger.ledger import checkpoint as cps
    from evalledger.ledger.proof import build_bundle
    with open_existing(args, readonly=True) as led:
        case_id = case_or_usage_error(led, args.case)
        stored = [e for e in led.read(types=["checkpoint.signed"])]
        if not stored:
            raise UsageError("no checkpoint in this ledger yet: run 'evalledger checkpoint --key KEY' first")
        chosen = stored[-1] if args.checkpoint is None else next(
            (e for e in stored if e.data["size"] == args.checkpoint), None)
        if chosen is None:
            sizes = ", ".join(str(e.data["size"]) for e in stored)
            raise UsageError(f"no checkpoint at seq {args.checkpoint}; checkpoints: {sizes}")
        note = chosen.data["note"]
        checkpoint = cps.parse_text(note.rpartition("\n\n")[0] + "\n")
        seqs = [e.seq for e in led.read(stream=f"case:{case_id}") if e.seq <= checkpoint.size]
        if not seqs:
            raise UsageError(f"case {case_id} has no event in the checkpoint at seq {checkpoint.size}; "
                             "make a newer checkpoint")
        try:
            bundle = build_bundle(led, seqs, note, checkpoint)
        except cps.CheckpointError as exc:
            print(f"evalledger prove: {exc}", file=sys.stderr)
            return 1
    raw = orjson.dumps(bundle, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    write_out(args.out, raw)
    hashes = sum(len(e["proof"]) for e in bundle["events"])
    print(f"proof of case {case_id}: {len(seqs)} events against the checkpoint at seq {checkpoint.size}, "
          f"{hashes} proof hashes ({max(len(e['proof']) for e in bundle['events'])} at most per event), "
          f"{len(raw)} bytes -> {args.out}")
    return 0


def _verifier(path: str):
    """The verifier key in ``path`` (a signer key file gives its verifier)."""
    from evalledger.ledger import signed_note
    try:
        verifier = signed_note.load_key(regular_file(path))
    except (OSError, signed_note.NoteError) as exc:
        raise UsageError(f"{path}: {exc}") from None
    return verifier.verifier if isinstance(verifier, signed_note.Signer) else verifier


def report_claim(path: str) -> dict | None:
    """The checkpoint a report file names (markdown provenance lines, or aggregate-stats.json's
    ``checkpoint`` and ``ledger_head``); None when it names none. UsageError when it is no report."""
    from evalledger.projections.markdown import parse_checkpoint_line
    try:
        raw = Path(regular_file(path)).read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    if path.endswith(".json"):
        try:
            doc = orjson.loads(raw)
            checkpoint, head = doc.get("checkpoint", False), doc["ledger_head"]
        except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError):
            raise UsageError(f"{path}: not a report's JSON (no ledger_head)") from None
        if checkpoint is False:
            raise UsageError(f"{path}: this report states no checkpoint (made before reports named one?)")
        return None if checkpoint is None else {**checkpoint, "ledger_head": head}
    try:
        return parse_checkpoint_line(raw.decode("utf-8", "replace"))
    except ValueError as exc:
        raise UsageError(f"{path}: {exc}") from None


def check_report(args) -> int:
    """``check-proof --report``: the report's checkpoint against a checkpoints file, offline."""
    from evalledger.ledger import checkpoint as cps
    if not args.checkpoints:
        raise UsageError("--report needs --checkpoints FILE (the home's checkpoints.jsonl or a published copy)")
    verifier = _verifier(args.pubkey)
    claim = report_claim(args.report)
    try:
        rows = cps.read_checkpoints(regular_file(args.checkpoints))
    except OSError as exc:
        raise UsageError(f"{args.checkpoints}: {exc.strerror or exc}") from None
    except cps.CheckpointError as exc:
        raise UsageError(str(exc)) from None
    if claim is None:
        print(f"FAILED {args.report}: the report was built under no signed checkpoint")
        return 1
    try:
        said = cps.check_report_claim(claim, rows, verifier)
    except cps.CheckpointError as exc:
        print(f"FAILED {args.report}: {exc}")
        return 1
    print(f"OK {args.report}: {said}")
    print("  (only the report's checkpoint line is checked: its figures are not; rebuild them from the "
          "ledger, 'evalledger rebuild', to check those)")
    return 0


def cmd_check_proof(args) -> int:
    """Check a bundle (or with --report, a report's checkpoint line) offline with the publisher's
    verifier key; exit 1 with the reason when it fails."""
    from evalledger.ledger.proof import ProofFailed, check_proof, missing_versions
    if args.report:
        return check_report(args)
    if not args.bundle:
        raise UsageError("check-proof needs a BUNDLE (or --report REPORT --checkpoints FILE)")
    verifier = _verifier(args.pubkey)
    try:
        bundle = orjson.loads(Path(regular_file(args.bundle)).read_bytes())
    except OSError as exc:
        raise UsageError(f"{args.bundle}: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError as exc:
        print(f"FAILED {args.bundle}: not JSON: {exc}")
        return 1
    try:
        checkpoint, events = check_proof(bundle, verifier)
    except ProofFailed as exc:
        print(f"FAILED {args.bundle}: {exc}")
        return 1
    gaps = missing_versions(events)
    if gaps:
        stream, versions = next(iter(gaps.items()))
        print(f"FAILED {args.bundle}: stream {stream}: version(s) {', '.join(map(str, versions[:20]))} missing: the "
              "bundle holds a selection of the case's events, not every one up to the checkpoint")
        return 1
    print(f"OK {len(events)} events proven in the checkpoint of ledger {checkpoint.origin} at seq "
          f"{checkpoint.size} ({checkpoint.time}), signed by {verifier.name}")
    for event in events:
        print(f"  seq {event.seq} {event.type} {event.stream} {event.hash}")
    print("  (every version of each stream up to the last one shown is here; events after it, such as a later "
          "override, no bundle can show: ask for a bundle against a newer checkpoint)")
    return 0
