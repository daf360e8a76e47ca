"""A schema bump with an upcaster reaches every reader: the dispatcher, the projections, history,
diff and replay all read a ``case.opened`` stored at schema 1, in an older shape, as the current one.

The test bumps ``case.opened`` to schema 2 with an upcaster (registered for this test only) that
renames two keys. The old ledger is made the way an older evalledger would have written it: a
home is ingested (at schema 2) and exported; its ``case.opened`` payloads are rewritten into
schema 1's shape (the answering model under ``answering_model``, the response under
``response_text``, ``schema`` 1) with the hash chain recomputed, and imported into a new home.
"""

from __future__ import annotations

import pytest

from evalledger import ledger
from evalledger.ledger import NewEvent, Payload, event_type, schemas
from evalledger.ledger.envelope import canonical_bytes, canonical_json, chain_hash, decode_json, line_bytes
from evalledger.projections.diff import diff_homes
from evalledger.projections.history import case_history
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.stages.replaying import replay_into, unrecorded_requests
from evalledger.testing.stand_in import StandIn, StandInThread
from stages_scripted import dispatch, template_judge
from stages_support import RESPONSE, home_with, template_benchmark

RESPONSES = [{"question_id": "q1", "model": "model-a", "text": RESPONSE},
             {"question_id": "q1", "model": "model-b", "text": "I think it is 24 pairs."}]


def to_old_shape(data: dict) -> dict:
    """``case.opened`` as schema 1 had it."""
    old = dict(data)
    old["answering_model"] = old.pop("model")
    old["response_text"] = old.pop("response")
    return old


def from_old_shape(data: dict) -> dict:
    """The upcaster 1 -> 2: the names schema 2 uses."""
    data["model"] = data.pop("answering_model")
    data["response"] = data.pop("response_text")
    return data


def rewritten(lines: list[bytes], change) -> bytes:
    """The lines with each ``case.opened`` payload changed and the chain recomputed from there on."""
    out, prev = [], "0" * 64
    for line in lines:
        env = decode_json(line)
        data, schema = env["data"], env["schema"]
        if env["type"] == "case.opened":
            data, schema = change(data), 1
        canonical = canonical_bytes(env["seq"], env["id"], env["stream"], env["version"], env["type"],
                                    schema, canonical_json(data), canonical_json(env["meta"]))
        prev_hash, prev = prev, chain_hash(prev, canonical)
        out.append(line_bytes(canonical, prev_hash, prev))
    return b"".join(out)


@pytest.fixture
def judge():
    """The scripted template judge on the local stand-in; yields RunSettings for it."""
    with StandInThread(StandIn(reply_fn=dispatch(template_judge()))) as stand_in:
        yield RunSettings(judge_backend="openai", judge_model="scripted-model",
                          judge_options={"base_url": stand_in.base_url, "backoff_base_s": 0.01})


@pytest.fixture
def bumped(monkeypatch):
    """``case.opened`` moved to schema 2 with the upcaster from 1, for this test only."""
    monkeypatch.setitem(schemas.SCHEMAS, "case.opened", 2)
    monkeypatch.setitem(schemas.UPCASTERS, ("case.opened", 1), from_old_shape)


@pytest.fixture
def homes(tmp_path, judge, bumped):
    """(current, old): a judged home, and a home holding only its inputs in the old shape."""
    current = home_with(tmp_path, ("b.json", template_benchmark(responses=RESPONSES)))
    with ledger.open_ledger(current) as led:
        led.export(tmp_path / "inputs.jsonl")  # before the run: the ingestion events only
        assert run_until_idle(led, judge).judged == 2
    inputs = (tmp_path / "inputs.jsonl").read_bytes().splitlines(keepends=True)
    old = tmp_path / "old"
    (tmp_path / "old.jsonl").write_bytes(rewritten(inputs, to_old_shape))
    with ledger.open_ledger(old) as led:
        led.import_file(tmp_path / "old.jsonl")
    return current, old


def test_every_reader_sees_an_old_case_opened_at_the_current_schema(homes, judge, tmp_path):
    current, old = homes
    with ledger.open_ledger(old) as led:
        [opened, *_] = led.read(types="case.opened")
        assert opened.schema == 1 and "answering_model" in opened.stored_data  # stored as it was
        assert opened.data["model"] in ("model-a", "model-b") and "answering_model" not in opened.data
        assert opened.payload().response in (RESPONSE, RESPONSES[1]["text"])
        assert led.get(opened.id).payload() == opened.payload()

        # the dispatcher judges the old cases from the upcast payload (the scripted judge reads
        # the response from the prompt: with no response, no excerpt and a failed case)
        summary = run_until_idle(led, judge)
        assert (summary.judged, summary.failed) == (2, 0), summary.failures

        # history shows the case as opened at the current schema
        history = case_history(led, opened.data["case_id"])
        [shown] = [e for e in history["events"] if e["type"] == "case.opened"]
        assert history["model"] == shown["data"]["model"] == opened.data["model"]

    # projections and diff: the same results, models and events as the home that never changed
    diff = diff_homes(current, old)
    assert diff["changed_cases"] == [] and diff["metric_changes"] == [], diff

    # replay answers every request from the old home's record, and copies its inputs upcast
    result = replay_into(old, tmp_path / "replayed")
    assert (result.summary.judged, result.missing) == (2, [])
    with ledger.open_ledger(tmp_path / "replayed") as led:
        copied = list(led.read(types="case.opened"))
        assert {e.schema for e in copied} == {2} and {e.data["model"] for e in copied} == {"model-a", "model-b"}
    assert diff_homes(current, tmp_path / "replayed")["changed_cases"] == []


def test_projections_fold_an_old_event_through_the_raw_scan(homes):
    """The fold's own scan (not ``read``) also gets the upcast payload: the models are named."""
    from evalledger import projections
    from evalledger.projections.store import ReadModelStore
    _, old = homes
    with ledger.open_ledger(old) as led:
        projections.rebuild(led)
        rows = list(led.scan(1, led.head().seq, ["case.opened"]))
        assert rows and all(r.schema == 2 and isinstance(r.data, dict) and "model" in r.data for r in rows)
        store = ReadModelStore(led)
        try:
            assert sorted(c["model"] for c in store.iter_cases()) == ["model-a", "model-b"]
        finally:
            store.close()


@pytest.mark.parametrize("where", ["home", "events.jsonl"])
def test_every_read_path_of_every_backend_upcasts(tmp_path, monkeypatch, where):
    """read, get, scan and an idempotent append's returned event: all at the current schema."""
    for registry in (schemas.MODELS, schemas.SCHEMAS):   # the type exists for this test only
        monkeypatch.setitem(registry, "test.upcast", None)

    @event_type("test.upcast", schema=1)
    class Renamed(Payload):
        name: str

    with ledger.open_ledger(tmp_path / where) as led:
        [stored] = led.append(NewEvent("test:u", "test.upcast", {"name": "Ada Lovelace"}, key="k"))

        @event_type("test.upcast", schema=2)
        class Renamed(Payload):  # noqa: F811  (same qualname: the type moves to schema 2)
            first: str
            last: str

        monkeypatch.setitem(schemas.UPCASTERS, ("test.upcast", 1),
                            lambda d: dict(zip(("first", "last"), d.pop("name").split(" "), strict=True)))
        want = {"first": "Ada", "last": "Lovelace"}
        [read] = led.read()
        [again] = led.append(NewEvent("test:u", "test.upcast", {"first": "x", "last": "y"}, key="k"))
        [row] = led.scan(1, 1, ["test.upcast"])
        [plain] = led.scan(1, 1, ["test.upcast"], resolve=False, plain=True)   # a fold's scan: upcast too
        assert read.data == led.get(stored.id).data == again.data == row.data == plain.data == want
        assert tuple(plain) == tuple(row)
        assert read.payload() == Renamed(**want) and read.schema == row.schema - 1 == 1
    with ledger.open_ledger(tmp_path / where, readonly=True) as led:
        assert led.verify().ok  # the stored bytes were never touched


def test_a_replay_miss_is_named_by_the_stage_failed_fields(homes, tmp_path):
    """Under a config whose requests were never recorded, stage.failed carries role and hash."""
    current, _ = homes
    result = replay_into(current, tmp_path / "stricter", overrides={"deep_judgment_enabled": True})
    assert result.missing and result.summary.failed == 2
    with ledger.open_ledger(tmp_path / "stricter") as led:
        failed = [e.payload() for e in led.read(types="stage.failed")]
        assert all(f.unrecorded and f.role and len(f.request_hash) == 64 for f in failed)
        assert {(m["role"], m["request_hash"]) for m in unrecorded_requests(led)} == {
            (f.role, f.request_hash) for f in failed}
