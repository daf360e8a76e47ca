"""Any payload reads back byte for byte, however many objects in it look like a reference or an escape.

A store with blobs keeps ``{"$blob": "sha256:..."}`` references in stored data and wraps a user's
object of that shape (or of the escape's own shape, ``{"$lit": ...}``) as ``{"$lit": {...}}``;
every read unwraps it. These tests append generated payloads made of such objects (nested escapes,
an escape of a number, a reference beside a long string that becomes a blob of its own) and read
them back through every public path on every backend: read, get, get_stored + join, scan, export
then import into each store form, and a replay of the export.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalledger import ledger
from evalledger.ledger import NewEvent
from postgres_support import skipping_postgres
from test_ledger_contract import BACKENDS

REF_TEXT = "sha256:" + "ab" * 32
#: keys a reference or an escape uses, keys close to them, and an ordinary key
KEYS = st.sampled_from(["$lit", "$blob", "$ref", "$", "a"])
LEAVES = (st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.text(max_size=4)
          | st.sampled_from([REF_TEXT, "$lit", "$blob", "x" * 400]))
#: containers, and one-key objects of the reference's and the escape's shapes around any value
VALUES = st.recursive(LEAVES, lambda inner: (st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=2)
                                             | st.builds(lambda key, v: {key: v}, KEYS, inner)), max_leaves=12)
#: payloads no generator is sure to reach: each nests the shapes the escape gives and takes
FIXED = [
    {"$lit": 5}, {"$lit": {"$lit": {"a": 1}}}, {"$lit": {"$lit": 5}}, {"$lit": {"$blob": REF_TEXT}},
    {"$blob": REF_TEXT}, {"$blob": 5}, {"$lit": []}, {"$lit": {}}, {"$lit": None}, {"$lit": "x" * 400},
    [{"$lit": {"$lit": {"$lit": {"$blob": "x"}}}}], {"$lit": {"$lit": {"$lit": ["x" * 700]}}},
]

META = {"recorded_at": "2026-01-01T00:00:00.000000Z"}


def events(value) -> list[NewEvent]:
    """A benchmark (stored inline) and a judge call (split into blobs where a store keeps them), each holding ``value``."""
    benchmark = {"benchmark": "b", "name": "b", "kind": "template", "config": {"v": value}, "questions": [{"q": value}]}
    call = {"role": "parse", "backend": "offline", "model": "m", "request_hash": "a" * 64, "attempt": 1,
            "request": {"messages": [{"role": "user", "content": "p " * 200}], "parameters": {"v": value}},
            "reply": value}
    return [NewEvent("benchmark:b", "benchmark.registered", benchmark, key="b", meta=META),
            NewEvent("case:c", "judge.called", call, key="c", meta=META)]


def expected(new: NewEvent) -> bytes:
    """The canonical JSON of the payload as appended (after its model's validation)."""
    return ledger.canonical_json(ledger.payload_model(new.type).model_validate(new.data).model_dump(mode="json"))


def payloads(led: ledger.Ledger) -> list[bytes]:
    return [ledger.canonical_json(e.data) for e in led.read()]


def check_round_trip(tmp, value) -> None:
    """Append ``value``'s events to each backend and read them back through every path."""
    new = events(value)
    want = [expected(e) for e in new]
    exports = {}
    for name, make in BACKENDS.items():
        if name == "postgres" and skipping_postgres():
            continue
        (tmp / name).mkdir(parents=True)
        backend = make(tmp / name)
        with backend.open() as led:
            appended = led.append(new)
            assert [ledger.canonical_json(e.data) for e in appended] == want, name
        with backend.open(readonly=True) as led:
            assert payloads(led) == want, name
            assert [ledger.canonical_json(led.get(e.id).data) for e in appended] == want, name
            assert [ledger.canonical_json(led.join(led.get_stored(e.id).stored_data)) for e in appended] == want, name
            rows = list(led.scan(1, 2, ["benchmark.registered", "judge.called"]))
            assert [ledger.canonical_json(r.data if not isinstance(r.data, (str, bytes)) else ledger.decode_json(r.data))
                    for r in rows] == want, name
            assert led.verify().ok, name
            out = tmp / f"{name}.export.jsonl"
            led.export(out)
            exports[name] = out.read_bytes()
        for target in (tmp / f"{name}-copy.jsonl", tmp / f"{name}-copy"):
            if not target.suffix:
                ledger.init_home(target)
            with ledger.open_ledger(target) as copy:
                assert copy.import_file(out) == 2
            with ledger.open_ledger(target, readonly=True) as copy:
                assert payloads(copy) == want and copy.verify().ok, (name, target)
    # the stores with blobs (SQLite, PostgreSQL) split the judge call alike: their exports are the same bytes
    assert len({v for k, v in exports.items() if k != "jsonl"}) == 1, exports


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(value=VALUES)
def test_a_generated_payload_of_reference_and_escape_shaped_objects_reads_back_exactly(tmp_path_factory, value):
    check_round_trip(tmp_path_factory.mktemp("generated"), value)


def test_nested_escapes_read_back_exactly_and_replay(tmp_path, run_cli):
    for i, value in enumerate(FIXED):
        check_round_trip(tmp_path / f"v{i}", value)
    home = ledger.init_home(tmp_path / "home")
    with ledger.open_ledger(home) as led:
        led.append(events(FIXED))
    done = run_cli("replay", "--into", tmp_path / "replayed", "--quiet", home=home)
    assert done.returncode == 0, done.stderr
    with ledger.open_ledger(tmp_path / "replayed", readonly=True) as replayed:
        [event] = replayed.read(types=["benchmark.registered"])
        assert event.data["config"] == {"v": FIXED}
