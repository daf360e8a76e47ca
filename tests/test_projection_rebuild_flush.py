"""A rebuild writes its case states out in batches (``FLUSH_EVERY``) and looks up stored rows only
for the cases it has already written: a case touched again after its batch was written must still
leave the digest right, and the tables the same as a fold one event at a time."""

from __future__ import annotations

from evalledger import ledger, projections
from evalledger.projections import catch_up
from evalledger.projections.store import KEYED_TABLES, ReadModelStore
from evalledger.testing import synthetic as syn


def interleaved_cases(led) -> list[str]:
    """Six template cases opened first and judged after: every case spans the rebuild's batches."""
    cases = [syn.template_case("bench", f"q{i}", "model-a", "pass" if i % 2 else "fail",
                               fields={"n": bool(i % 2)}, calls=1) for i in range(6)]
    for _, events in cases:
        led.append(events[:1])                       # case.opened of every case first
    for _, events in cases:
        for event in events[1:]:
            led.append([event])                      # then the rest, one event at a time
            projections.update(led)                  # the incremental fold the rebuild must match
    return [case_id for case_id, _ in cases]


def rows(store: ReadModelStore) -> dict[str, list[tuple]]:
    """Every row of the read-model tables but the position."""
    return {table: list(store.rows(table, key)) for table, key in KEYED_TABLES if table != "proj_position"}


def test_a_rebuild_in_small_batches_keeps_the_digest_and_the_incremental_tables(tmp_path, monkeypatch):
    """Written twice, a case's first row is XORed out of the digest (the rebuild names it stored)."""
    with ledger.open_ledger(tmp_path / "home") as led:
        interleaved_cases(led)
        store = ReadModelStore(led)
        try:
            incremental = rows(store)
            monkeypatch.setattr(catch_up, "FLUSH_EVERY", 2)   # a batch of two cases: each case written twice
            catch_up.rebuild(led, store)
            store.check_digest()                               # raises when a replaced row was not XORed out
            assert store.stored_digest() == store.contents_digest()
            assert rows(store) == incremental
        finally:
            store.close()


def test_save_looks_up_only_the_cases_it_is_told_may_be_stored(tmp_path):
    """The unit under the rebuild above: ``stored_cases`` names the rows a save replaces."""
    with ledger.open_ledger(tmp_path / "home") as led:
        case_ids = interleaved_cases(led)
        store = ReadModelStore(led)
        try:
            states = store.load_cases(case_ids)
            first, second = states[case_ids[0]], states[case_ids[1]]
            store.drop()
            store.save([first], {}, {}, None, stored_cases=set())          # never written: no lookup
            store.save([first, second], {}, {}, None, stored_cases={case_ids[0]})
            assert store.stored_digest() == store.contents_digest()
            # a row another fold wrote (the count differs from the cases named): every case looked up
            store.save([first, second], {}, {}, None, stored_cases={case_ids[0]})
            assert store.stored_digest() == store.contents_digest()
            # told wrongly (with the right count) that a stored case was never written, its old row
            # stays in the digest: the lookup is skipped
            store.save([first, second], {}, {}, None, stored_cases={case_ids[0], "another"})
            assert store.stored_digest() != store.contents_digest()
        finally:
            store.close()
