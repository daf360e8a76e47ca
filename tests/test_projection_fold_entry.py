"""A rebuild takes a judge call's read-model entry straight from its stored payload.

``appliers.judge_call_entry`` reads a ``judge.called`` payload as the ledger stores it (blob
references in place) and resolves only what the entry needs, in one pass: the rebuild's hot path
for a third of all events. Its entries must equal those read from the whole payload, for calls
whose read parts sit at every place the blob store may put them, with the prompts' and replies'
blobs deleted (so a fetch of one would fail). Real SQLite homes, with and without the blob store.
"""

from __future__ import annotations

from pathlib import Path

from evalledger import ledger
from evalledger.ledger.envelope import decode_json
from evalledger.projections import appliers
from test_projection_blob_reads import case_events, drop_unread_blobs, old_home


def stored_calls(home: Path) -> dict[str, dict]:
    """Every judge.called of a home by event id: its payload as stored (references left in place)."""
    with ledger.open_ledger(home, readonly=True) as led:
        return {row.id: decode_json(row.data)
                for row in led.scan(1, led.head().seq, ["judge.called"], resolve=False)}


def test_a_calls_entry_from_its_stored_payload_is_the_one_from_its_whole_payload(tmp_path):
    events = [e for i in range(2) for e in case_events(i)]
    new, old = ledger.init_home(tmp_path / "new"), old_home(tmp_path / "old")
    for home in (new, old):
        with ledger.open_ledger(home) as led:
            led.append(events)
    assert drop_unread_blobs(new) >= 2          # the prompts and replies are gone
    whole = stored_calls(old)                   # stored before the blob store: whole payloads
    with ledger.open_ledger(new, readonly=True) as led:
        stored = stored_calls(new)
        assert stored.keys() == whole.keys() and len(stored) == 14
        assert sum("$blob" in repr(d) for d in stored.values()) >= 10
        for event_id, data in stored.items():
            entry = appliers.judge_call_entry(data, led.join, led.open)
            assert entry == appliers.judge_call_entry(whole[event_id]), event_id
            assert len(entry) == len(appliers.CALL_FIELDS)
    entries = [appliers.call_fields(appliers.judge_call_entry(d)) for d in whole.values()]
    assert {(e["role"][:5], e["subject"], len(e["targets"])) for e in entries} >= {
        ("extra", "template", 1), ("extra", "rubric", 6), ("parse", "template", 6), ("score", None, 0),
        ("asses", "template", 0), ("asses", "template", 6), ("rrrrr", None, 0)}
    assert any(e["input_tokens"] == 10 ** 30 for e in entries)
