"""The fold reads a judge call's small fields and its request's payload, never its prompt or reply.

The read models' rebuild scans the stored rows with blob references left in place and resolves
only the parts the appliers read (``appliers.judge_call_reads``). Real SQLite homes: one judged by
the offline judge through the CLI, and the same hand-made events in a home with the blob store and
in one made before it (payloads stored whole), whose read models must be the same rows.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from conftest import cli
from evalledger import ledger, projections
from evalledger.ledger.blobs import ref_key
from evalledger.ledger.envelope import decode_json
from evalledger.ledger.sqlite import SQLiteRecorder
from evalledger.projections import appliers
from evalledger.projections.store import KEYED_TABLES, ReadModelStore
from evalledger.testing import synthetic as syn
from evalledger.testing.arithmetic import arithmetic_benchmark


def old_home(path: Path) -> Path:
    """A home whose store was made before the blob store (every payload stored whole)."""
    ledger.init_home(path)
    for file in path.glob("ledger.db*"):
        file.unlink()
    (path / "events.jsonl").unlink()
    SQLiteRecorder(str(path / "ledger.db"), blobs=False).close()
    return path


def call(case_id: str, role: str, n: int, **parts) -> ledger.NewEvent:
    """A judge.called of ``case_id`` with its small fields and any ``parts`` (request, reply ...)."""
    event = syn.judge_call(case_id, role, step=str(n))
    return ledger.NewEvent(event.stream, event.type, {**event.data, "case_id": case_id, **parts},
                           key=event.key, meta=event.meta)


PROMPT = "Quote the exact sentences of the response that support each attribute. " * 12
ATTRIBUTES = [{"name": f"attr{i}", "description": "what the response says about it " * 4} for i in range(6)]
# Parameters small one by one and long together: they make the request a blob of its own.
PARAMETERS = {f"p{i:02}": i for i in range(45)}


def tricky_calls(case_id: str) -> list[ledger.NewEvent]:
    """Judge calls whose read parts sit at every place the blob store may put them."""
    messages = [{"role": "system", "content": PROMPT}, {"role": "user", "content": "the response " * 40}]
    return [
        # the request inline, its prompt a blob; the reply a blob
        call(case_id, "extract_excerpts", 1, request={"payload": {"attributes": [{"name": "n"}]},
                                                      "messages": messages}, reply={"text": "r " * 400}),
        # the request's payload a blob of its own (its descriptions are long)
        call(case_id, "extract_excerpts", 2, request={"payload": {"attributes": ATTRIBUTES, "subject": "rubric"},
                                                      "messages": [{"role": "user", "content": "short"}]}),
        # the whole request one blob, holding the blob of its payload
        call(case_id, "parse", 3, request={"payload": {"fields": ATTRIBUTES}, "messages": messages,
                                           "parameters": PARAMETERS}),
        # a request that looks like a reference (stored escaped), and a long error (a blob)
        call(case_id, "score_trait", 4, request={"$blob": "not a reference"}, error="timed out " * 60),
        # a payload that looks like a reference; usage holding a long string and a long integer
        call(case_id, "assess_risk", 5, request={"payload": {"$lit": {"attribute": "n"}}},
             usage={"prompt_tokens": 10 ** 30, "completion_tokens": 3, "note": "x" * 400}),
        # a role long enough to be a blob (no deep role: its request is never read)
        call(case_id, "r" * 350, 6, request={"payload": {"attributes": ATTRIBUTES}}, model="m" * 320),
        # an evidence payload that is a blob, in a request that is one too
        call(case_id, "assess_risk", 7, request={"payload": {"evidence": [{"attribute": a["name"], "text": PROMPT}
                                                                          for a in ATTRIBUTES]},
                                                 "messages": messages, "parameters": PARAMETERS}),
    ]


def case_events(i: int) -> list[ledger.NewEvent]:
    """A template case with the tricky calls, then its verdict."""
    case_id, events = syn.template_case("bench", f"q{i}", "model-a", "pass", fields={"n": True}, calls=0)
    return events[:1] + tricky_calls(case_id) + events[1:]


def read_model_rows(home: Path) -> dict[str, list[tuple]]:
    """Every row of every read-model table of a home, by table."""
    with ledger.open_ledger(home, readonly=True) as led:
        store = ReadModelStore(led)
        try:
            return {table: list(store.rows(table, key)) for table, key in KEYED_TABLES if table != "proj_position"}
        finally:
            store.close()


def test_a_blob_home_folds_to_the_same_read_models_as_a_home_without_blobs(tmp_path):
    # Its prompt, reply and other unread blobs deleted first: a fold that fetched one would fail.
    events = [e for i in range(3) for e in case_events(i)]
    new, old = ledger.init_home(tmp_path / "new"), old_home(tmp_path / "old")
    for part in (events[:10], events[10:]):     # the incremental path, then the rest
        for home in (new, old):
            with ledger.open_ledger(home) as led:
                led.append(part)
        assert drop_unread_blobs(new) >= 2
        for home in (new, old):
            with ledger.open_ledger(home) as led:
                projections.update(led)
    stored = sqlite3.connect(new / "ledger.db").execute(
        "SELECT CAST(data AS BLOB) FROM events WHERE type = 'judge.called'").fetchall()
    assert sum(b'"$blob"' in row[0] for row in stored) >= 15   # the parts above really are blobs
    assert sum(b'"request":{"$blob"' in row[0] for row in stored) == 6
    assert b'"$lit"' in b"".join(row[0] for row in stored)
    incremental = read_model_rows(new)
    assert incremental == read_model_rows(old)
    calls = [appliers.call_fields(c) for case in projections_cases(new) for c in case["calls"].values()]
    assert {(c["subject"], tuple(c["targets"])) for c in calls} >= {
        ("template", ("n",)), ("rubric", tuple(a["name"] for a in ATTRIBUTES)),
        ("template", tuple(a["name"] for a in ATTRIBUTES)), ("template", ("n",))}
    assert any(c["input_tokens"] == 10 ** 30 for c in calls) and any(str(c["error"]).startswith("timed out")
                                                                      for c in calls)
    with ledger.open_ledger(new) as led:
        projections.rebuild(led)
    assert read_model_rows(new) == incremental


def drop_unread_blobs(home: Path) -> int:
    """Delete every blob of a home that a fold does not read (prompts, replies); returns how many."""
    needed = blobs_the_fold_reads(home)
    conn = sqlite3.connect(home / "ledger.db")
    gone = {bytes(k).hex() for (k,) in conn.execute("SELECT key FROM blobs")} - needed
    conn.execute("DROP TRIGGER IF EXISTS blobs_refuse_delete")   # the damage a fold must not depend on
    conn.executemany("DELETE FROM blobs WHERE key = ?", [(bytes.fromhex(k),) for k in gone])
    conn.commit()
    conn.close()
    return len(gone)


def blobs_the_fold_reads(home: Path) -> set[str]:
    """The keys of the blobs a fold needs: those in a judge call's small fields, and for a
    deep-judgment call its request's and those in the request's payload."""
    needed: set[str] = set()
    with ledger.open_ledger(home, readonly=True) as led:
        for row in led.scan(1, led.head().seq, ["judge.called"], resolve=False):
            data = decode_json(row.data)
            for name in appliers.JUDGE_CALL_READS:
                note_refs(data.get(name), led, needed)
            if led.join(data.get("role")) not in appliers.DEEP_ROLES:
                continue
            request = data.get("request")
            if isinstance(request, dict) and list(request) == ["$blob"]:
                needed.add(ref_key(request["$blob"]))
                request = led.open(request)
            note_refs(request if list(request or {}) == ["$lit"] else (request or {}).get("payload"), led, needed)
    return needed


def note_refs(value, led, needed: set[str]) -> None:
    """Add the key of every reference in ``value`` (and in the blobs it refers to) to ``needed``."""
    if isinstance(value, dict):
        if list(value) == ["$blob"]:
            needed.add(ref_key(value["$blob"]))
            note_refs(led.open(value), led, needed)
            return
        if list(value) == ["$lit"] and isinstance(value["$lit"], dict):   # escaped: its own keys are data
            value = value["$lit"]
        for inner in value.values():
            note_refs(inner, led, needed)
    elif isinstance(value, list):
        for inner in value:
            note_refs(inner, led, needed)


def projections_cases(home: Path) -> list[dict]:
    """The folded case states of a home."""
    with ledger.open_ledger(home, readonly=True) as led:
        store = ReadModelStore(led)
        try:
            return list(store.iter_cases())
        finally:
            store.close()


@pytest.fixture(scope="module")
def judged_home(tmp_path_factory) -> Path:
    """A home judged by the offline judge (deep judgment) through the CLI, reports written."""
    root = tmp_path_factory.mktemp("judged")
    home = root / "home"
    assert cli("init", home=home).returncode == 0
    source = root / "arith.json"
    source.write_text(json.dumps(arithmetic_benchmark(4, "arith")))
    for args in (("ingest", source), ("run", "--judge", "offline"), ("report",)):
        done = cli(*args, home=home)
        assert done.returncode == 0, done.stderr
    return home


def test_a_rebuild_reads_no_prompt_or_reply_so_it_needs_none_of_their_blobs(judged_home, tmp_path):
    home = Path(shutil.copytree(judged_home, tmp_path / "home"))
    reports = {p.relative_to(judged_home / "reports"): p.read_bytes()
               for p in sorted((judged_home / "reports").rglob("*")) if p.is_file()}
    assert drop_unread_blobs(home) >= 3   # the prompts (shared system prompts, the longer user messages)
    shutil.rmtree(home / "reports")
    done = cli("rebuild", home=home)
    assert done.returncode == 0, done.stderr
    rebuilt = {p.relative_to(home / "reports"): p.read_bytes()
               for p in sorted((home / "reports").rglob("*")) if p.is_file()}
    assert rebuilt == reports
    verify = cli("verify", home=home)   # the blobs are really gone: verify names them
    assert verify.returncode != 0 and "is missing" in verify.stdout + verify.stderr


def test_the_reads_list_names_every_key_the_judge_call_applier_reads():
    seen: set[str] = set()
    request_seen: set[str] = set()

    class Watched(dict):
        """A payload that notes each key read from it."""

        def __init__(self, data, log):
            super().__init__(data)
            self.log = log

        def get(self, key, default=None):
            self.log.add(key)
            return super().get(key, default)

        def __getitem__(self, key):
            self.log.add(key)
            return super().__getitem__(key)

        def __contains__(self, key):
            self.log.add(key)
            return super().__contains__(key)

    for role in sorted(appliers.DEEP_ROLES) + ["decompose"]:
        for extra in ({}, {"cost": None, "backend": "openai", "usage": {"cost": 1}}, {"cost_usd": 0.5}):
            data = dict(call("c1", role, 0, request={"payload": {"attributes": [{"name": "n"}]},
                                                     "messages": []}).data, **extra)
            data["request"] = Watched(data["request"], request_seen)
            case = appliers.new_case("c1")
            appliers.CASE_APPLIERS["judge.called"](case, Watched(data, seen), "1", 1)
    assert seen - {"request"} <= set(appliers.JUDGE_CALL_READS), seen - set(appliers.JUDGE_CALL_READS)
    assert request_seen <= {"payload"}


def test_open_reads_one_blob_and_leaves_the_references_inside_it(judged_home):
    with ledger.open_ledger(judged_home, readonly=True) as led:
        row = next(r for r in led.scan(1, led.head().seq, ["judge.called"], resolve=False)
                   if b'"request":{"$blob"' in bytes(r.data))
        ref = decode_json(row.data)["request"]
        opened = led.open(ref)
        assert set(opened) >= {"messages", "payload"}
        assert b'"$blob"' in json.dumps(opened).encode()      # its system prompt is still a reference
        assert led.join(opened) == led.get(row.id).data["request"]
        assert led.open(opened) is opened and led.open("text") == "text" and led.open(None) is None
