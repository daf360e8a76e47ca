"""What a replay reads from its source: the inputs copied as their stored bytes (their hashes
checked, so a store altered after the fact is refused), and each recorded answer read once, while
the source's call index is built, never read back per call."""

from __future__ import annotations

import sqlite3

import pytest

from evalledger import ledger
from evalledger.cli.main import main
from evalledger.ledger import NewEvent, StoredPayload, stored_payload
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.stages.replaying import COPIED_TYPES, replay_into
from stages_support import RESPONSE, home_with, template_benchmark

RESPONSES = [{"question_id": "q1", "model": f"m{i}", "text": f"Answer {i}: " + RESPONSE} for i in range(3)]


@pytest.fixture()
def judged(tmp_path):
    """A home with three template cases judged by the offline judge under deep judgment."""
    home = home_with(tmp_path, ("b.json", template_benchmark(config={"deep_judgment_enabled": True},
                                                             responses=RESPONSES)))
    with ledger.open_ledger(home) as led:
        summary = run_until_idle(led, RunSettings(judge_backend="offline"))
    assert summary.judged == 3
    return home


def _alter_a_case_opening(home) -> int:
    """Change a copied input in the store behind the ledger's back (its hash left as it was); its seq."""
    conn = sqlite3.connect(home / "ledger.db")
    try:
        seq, data = conn.execute("SELECT seq, data FROM events WHERE type = 'case.opened' ORDER BY seq").fetchone()
        conn.execute("DROP TRIGGER events_refuse_update")
        conn.execute("UPDATE events SET data = ? WHERE seq = ?", (data.replace("Answer 0", "Answer X"), seq))
        conn.commit()
    finally:
        conn.close()
    return seq


def test_a_replay_refuses_a_source_input_altered_in_the_store(judged, tmp_path, capsys):
    # A case whose response was changed after it was judged: copied on unchecked it would be judged
    # again under the new text, in a new home whose own chain is sound, the change no longer visible.
    seq = _alter_a_case_opening(judged)
    code = main(["--home", str(judged), "replay", "--into", str(tmp_path / "new"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert f"event seq {seq} (case.opened" in err and "does not match its hash" in err and str(judged) in err
    with ledger.open_ledger(tmp_path / "new", readonly=True) as new:
        assert not any("Answer X" in str(e.data) for e in new.read(types=["case.opened"]))


def test_stored_payload_checks_the_hash_and_hands_older_schemas_on_to_validation(judged):
    with ledger.open_ledger(judged, readonly=True) as source:
        opened = next(source.read(types=["case.opened"]))
        payload = stored_payload(opened, "the source")
        assert isinstance(payload, StoredPayload) and payload.raw == opened.raw_data.encode()
    _alter_a_case_opening(judged)
    with ledger.open_ledger(judged, readonly=True) as source:
        altered = next(source.read(types=["case.opened"]))
        with pytest.raises(ledger.LedgerError, match="the source: event seq .* does not match its hash"):
            stored_payload(altered, "the source")


def test_a_stored_payload_given_under_another_type_is_validated_and_refused(judged, tmp_path):
    with ledger.open_ledger(judged, readonly=True) as source:
        payload = stored_payload(next(source.read(types=["case.opened"])), "the source")
    with ledger.open_ledger(tmp_path / "other.jsonl") as other:
        with pytest.raises(ledger.EnvelopeError, match="invalid 'note.added' payload"):
            other.append(NewEvent("note:x", "note.added", payload))
        assert other.head().seq == 0


def test_a_replay_reads_no_source_event_back_per_call(judged, tmp_path):
    # The source's index keeps each recorded answer as it is built: a call reads none back.
    with ledger.open_ledger(judged, readonly=True) as source, ledger.open_ledger(tmp_path / "new") as new:
        reads = []
        get = source.recorder.get
        source.recorder.get = lambda id: reads.append(id) or get(id)
        result = replay_into(source, new)
    assert result.summary.judged == 3 and not result.missing and reads == []
    with ledger.open_ledger(judged, readonly=True) as source, ledger.open_ledger(tmp_path / "new") as new:
        original = {e.id: e.raw_data for e in source.read(types=COPIED_TYPES)}
        copied = {e.meta["source_event"]: e.raw_data for e in new.read(types=COPIED_TYPES)}
    assert copied == original and len(copied) == 3 + 3   # byte for byte: file, benchmark, responses; 3 cases
