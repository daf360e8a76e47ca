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
from evalledger.testing import synthetic as syn
from test_projection_blob_reads import call, case_events, drop_unread_blobs, old_home


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


def references_inside_the_read_parts(case_id: str) -> list[ledger.NewEvent]:
    """Judge calls whose request payload is inline but holds a blob where the entry's target is read:
    a long name, an item of a list long enough to be a blob, a long subject, a trait that is a blob."""
    long_item = {"name": "b", "d1": "x" * 290, "d2": "y" * 290}   # each string short, the dict a blob
    return [
        call(case_id, "extract_excerpts", 1, request={"payload": {"attributes": [{"name": "n" * 320}]}}),
        call(case_id, "extract_excerpts", 2, request={"payload": {"attributes": [{"name": "a"}, long_item]}}),
        call(case_id, "reason", 3, request={"payload": {"attributes": [{"name": "a"}], "subject": "s" * 330}}),
        call(case_id, "parse", 4, request={"payload": {"fields": [long_item, {"name": "c"}]}}),
        call(case_id, "score_trait", 5, request={"payload": {"trait": {**long_item, "name": "t"}}}),
        call(case_id, "assess_risk", 6, request={"payload": {"attribute": "z" * 310,
                                                             "evidence": [{"attribute": "e", "x": "y" * 300}]}}),
        call(case_id, "assess_risk", 7, request={"payload": {"evidence": [{"attribute": "e"}, long_item]}}),
    ]


def test_references_inside_the_parts_a_target_is_read_from_are_resolved(tmp_path):
    # The entry skips joining a payload whose read parts hold no reference: these do, one each.
    case_id, events = syn.template_case("bench", "q0", "model-a", "pass", fields={"n": True}, calls=0)
    events = events[:1] + references_inside_the_read_parts(case_id) + events[1:]
    new, old = ledger.init_home(tmp_path / "new"), old_home(tmp_path / "old")
    for home in (new, old):
        with ledger.open_ledger(home) as led:
            led.append(events)
    whole, stored = stored_calls(old), stored_calls(new)
    assert sum(repr(d["request"]["payload"]).count("$blob") for d in stored.values()) >= 7
    with ledger.open_ledger(new, readonly=True) as led:
        entries = {i: appliers.call_fields(appliers.judge_call_entry(d, led.join, led.open)) for i, d in stored.items()}
    assert entries == {i: appliers.call_fields(appliers.judge_call_entry(d)) for i, d in whole.items()}
    assert sorted((e["role"], tuple(e["targets"])) for e in entries.values()) == [
        ("assess_risk", ("None", "e")), ("assess_risk", ("e", "z" * 310)), ("extract_excerpts", ("a", "b")),
        ("extract_excerpts", ("n" * 320,)), ("parse", ("b", "c")), ("reason", ("a",)), ("score_trait", ("t",))]
