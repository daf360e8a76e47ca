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
