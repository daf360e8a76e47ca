"""A payload of any type may hold an object shaped like a blob reference, and reads give it back.

Only a judge call's payload was escaped (``{"$lit": ...}``) when stored; any other event holding
``{"$blob": "sha256:..."}`` as data was stored as given, and every read of a home (report,
verify, export, history) then looked for a blob that was never there and stopped.
"""

from __future__ import annotations

from evalledger import ledger

REF = {"$blob": "sha256:" + "ab" * 32}
CONFIG = {"looks_like_a_blob": REF, "an_escape": {"$lit": {"$blob": "x"}}, "in_a_list": [REF, {"$lit": 1}],
          "plain": {"$blob": "x", "other": 1}}


def registered(name: str) -> ledger.NewEvent:
    return ledger.NewEvent(f"benchmark:{name}", "benchmark.registered",
                           {"benchmark": name, "name": name, "kind": "template", "config": CONFIG}, key=name)


def test_an_object_shaped_like_a_reference_reads_back_as_it_was_appended(tmp_path, run_cli):
    home = ledger.init_home(tmp_path / "home")
    with ledger.open_ledger(home) as led:
        led.append([registered("b1")])
    with ledger.open_ledger(home, readonly=True) as led:
        [event] = led.read(types=["benchmark.registered"])
        assert event.data["config"] == CONFIG
        assert led.verify().ok
    for command in (("verify",), ("report",), ("log",)):
        done = run_cli(*command, home=home)
        assert done.returncode == 0, (command, done.stdout, done.stderr)
    out = tmp_path / "export.jsonl"
    assert run_cli("export", "--out", out, home=home).returncode == 0
    assert run_cli("import", out, home=tmp_path / "copy").returncode == 0
    with ledger.open_ledger(tmp_path / "copy", readonly=True) as copy:
        assert next(iter(copy.read(types=["benchmark.registered"]))).data["config"] == CONFIG


def test_a_payload_without_such_an_object_is_stored_as_its_canonical_json(tmp_path):
    # the escape touches only payloads that hold one: every other event's stored bytes are as before
    home = ledger.init_home(tmp_path / "home")
    plain = {"benchmark": "b2", "name": "b2", "kind": "template", "config": {"price": "$5", "x": {"$y": 1}}}
    with ledger.open_ledger(home) as led:
        [event] = led.append([ledger.NewEvent("benchmark:b2", "benchmark.registered", plain, key="b2")])
    stored = event.raw_data.encode() if isinstance(event.raw_data, str) else bytes(event.raw_data)
    model = ledger.payload_model("benchmark.registered")
    assert stored == ledger.canonical_json(model.model_validate(plain).model_dump(mode="json"))


def test_a_bare_jsonl_ledger_stores_such_an_object_escaped_and_every_command_reads_it(tmp_path, run_cli):
    # A standalone .jsonl ledger kept no blobs and stored payloads as given: the reference-shaped
    # object then read as a blob lost with the .blobs file, and report, verify, log and export stopped.
    bare = tmp_path / "bare.jsonl"
    with ledger.open_ledger(bare) as led:
        [appended] = led.append([registered("b1")])
        [called] = led.append([judge_call()])
    assert not (tmp_path / "bare.jsonl.blobs").exists()
    with ledger.open_ledger(bare, readonly=True) as led:
        [event] = led.read(types=["benchmark.registered"])
        assert event.data["config"] == CONFIG and led.get(appended.id).data["config"] == CONFIG
        assert led.get_stored(called.id).data == called.data == led.get(called.id).data
        assert called.data["request"]["parameters"]["x"] == REF
        [row] = led.scan(1, 2, ["benchmark.registered"])
        assert (row.data if isinstance(row.data, dict) else ledger.decode_json(row.data))["config"] == CONFIG
        # stored escaped, as a store with blobs stores it; the chain covers those bytes
        assert b'{"$lit":{"$blob":"sha256:' in bytes(event.raw_data) and led.verify().ok
    for command in (("verify",), ("report",), ("log",), ("status",), ("rebuild",)):
        done = run_cli(*command, home=bare)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (command, done.stdout, done.stderr)
    out = tmp_path / "export.jsonl"
    assert run_cli("export", "--out", out, home=bare).returncode == 0
    assert out.read_bytes() == bare.read_bytes()   # the stored lines, byte for byte
    for target in (tmp_path / "copy", tmp_path / "copy.jsonl"):
        done = run_cli("import", out, home=target)
        assert done.returncode == 0, done.stderr
        with ledger.open_ledger(target, readonly=True) as copy:
            assert next(iter(copy.read(types=["benchmark.registered"]))).data["config"] == CONFIG
            assert copy.verify().ok
    done = run_cli("replay", "--into", tmp_path / "replayed", "--quiet", home=bare)
    assert done.returncode == 0, done.stderr
    with ledger.open_ledger(tmp_path / "replayed", readonly=True) as replayed:
        assert next(iter(replayed.read(types=["benchmark.registered"]))).data["config"] == CONFIG


def test_a_home_exported_to_jsonl_reads_such_an_object_back_and_replays_it(tmp_path, run_cli):
    home = ledger.init_home(tmp_path / "home")
    with ledger.open_ledger(home) as led:
        led.append([registered("b1")])
    out = tmp_path / "export.jsonl"
    assert run_cli("export", "--out", out, home=home).returncode == 0
    with ledger.open_ledger(out, readonly=True) as exported:   # the export opened as a ledger of its own
        assert next(iter(exported.read())).data["config"] == CONFIG and exported.verify().ok
    with ledger.open_ledger(out) as exported:   # and appended to: the new event is stored escaped too
        exported.append([registered("b2")])
    done = run_cli("replay", "--into", tmp_path / "replayed", "--quiet", home=out)
    assert done.returncode == 0, done.stderr
    with ledger.open_ledger(tmp_path / "replayed", readonly=True) as replayed:
        assert [e.data["config"] for e in replayed.read(types=["benchmark.registered"])] == [CONFIG, CONFIG]


def test_a_store_made_before_blobs_stores_such_an_object_escaped(tmp_path):
    from evalledger.ledger.sqlite import SQLiteRecorder

    (tmp_path / "old").mkdir()
    SQLiteRecorder(str(tmp_path / "old" / "ledger.db"), blobs=False).close()   # a home as before the blob store
    old = ledger.init_home(tmp_path / "old")
    with ledger.open_ledger(old) as led:
        assert led.recorder.blobs is None
        [appended] = led.append([registered("b1")])
    with ledger.open_ledger(old, readonly=True) as led:
        assert next(iter(led.read())).data["config"] == CONFIG and led.verify().ok
        assert led.get(appended.id).data["config"] == CONFIG == led.get_stored(appended.id).data["config"]
        [row] = led.scan(1, 1, ["benchmark.registered"])
        assert ledger.decode_json(row.data)["config"] == CONFIG


def test_a_bare_jsonl_ledger_without_such_an_object_stores_its_canonical_json(tmp_path):
    bare = tmp_path / "bare.jsonl"
    plain = {"benchmark": "b2", "name": "b2", "kind": "template", "config": {"price": "$5", "x": {"$y": 1}}}
    with ledger.open_ledger(bare) as led:
        led.append([ledger.NewEvent("benchmark:b2", "benchmark.registered", plain, key="b2")])
    model = ledger.payload_model("benchmark.registered")
    stored = ledger.decode_json(bare.read_bytes())["data"]
    assert ledger.canonical_json(stored) == ledger.canonical_json(model.model_validate(plain).model_dump(mode="json"))


def judge_call() -> ledger.NewEvent:
    """A judge call whose request holds a reference-shaped object (a JSONL ledger splits nothing)."""
    data = {"role": "parse", "backend": "offline", "model": "m", "request_hash": "a" * 64, "attempt": 1,
            "request": {"messages": [{"role": "user", "content": "short"}], "parameters": {"x": REF}}}
    return ledger.NewEvent("case:c1", "judge.called", data, key="k")


def test_an_older_jsonl_ledger_holding_objects_stored_as_given_reads_without_an_error(tmp_path):
    # An older version stored a bare ledger's payloads as given: a one-key "$blob" object that is
    # no reference read as stored, and still does beside a literal in the same payload (unwrapped
    # by join's rule, as every store form reads it; a join would have refused "x" as a reference).
    from evalledger.ledger.envelope import canonical_bytes, chain_hash, event_id, line_bytes
    from evalledger.ledger.schemas import SCHEMAS

    config = {"odd": {"$blob": "x"}, "lit": {"$lit": {"$blob": "y"}}}
    data = ledger.canonical_json({"benchmark": "b", "name": "b", "kind": "template", "config": config})
    meta = ledger.canonical_json({"recorded_at": "2026-01-01T00:00:00.000000Z"})
    canonical = canonical_bytes(1, event_id("benchmark:b", "benchmark.registered", "b"), "benchmark:b", 1,
                                "benchmark.registered", SCHEMAS["benchmark.registered"], data, meta)
    old = tmp_path / "old.jsonl"
    old.write_bytes(line_bytes(canonical, "0" * 64, chain_hash("0" * 64, canonical)))
    with ledger.open_ledger(old, readonly=True) as led:
        [event] = led.read()
        assert event.data["config"] == {"odd": {"$blob": "x"}, "lit": {"$blob": "y"}}
        assert led.get(event.id).data["config"] == event.data["config"]
