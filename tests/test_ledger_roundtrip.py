"""Arbitrary JSON payloads round-trip exactly through both backends and through export/import.

A test-only event type with an ``Any`` field carries what Hypothesis generates: unicode (no lone
surrogates: JSON text cannot hold them), edge strings, integers beyond 64 bits, floats, and
nested lists and dicts.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalledger import ledger
from evalledger.ledger import NewEvent, Payload, event_type


@event_type("test.roundtrip")
class RoundTrip(Payload):
    value: Any = None


EDGE_STRINGS = st.sampled_from(["", "\x00", "\n\r\t", '"\\/', "\u2028\u2029", "\ud7ff\ue000\uffff",
                                "\U0001f600\U0010ffff", "é" * 3, "a\u0301", "\x7f\x1f", "null", "1e400"])
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30) | EDGE_STRINGS
SCALARS = (st.none() | st.booleans() | TEXT
           | st.integers(min_value=-(2 ** 70), max_value=2 ** 70)
           | st.sampled_from([2 ** 63 - 1, -(2 ** 63), 2 ** 64 - 1, 2 ** 64, -(2 ** 63) - 1, 10 ** 19, -(10 ** 25)])
           | st.floats(allow_nan=False, allow_infinity=False))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                      max_leaves=25)


def same(a: Any, b: Any) -> bool:
    """Equal and of the same JSON kinds all the way down (1 is not 1.0, -0.0 keeps its sign)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(VALUES, min_size=1, max_size=4))
def test_payloads_round_trip_through_both_backends_and_export_import(values):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        events = [NewEvent("test:rt", "test.roundtrip", {"value": v}) for v in values]
        with ledger.open_ledger(tmp / "home") as home, ledger.open_ledger(tmp / "store.jsonl") as store:
            for led in (home, store):
                led.append(events)
                read = [e.data["value"] for e in led.read()]
                assert all(same(a, b) for a, b in zip(read, values)) and len(read) == len(values)
                assert all(same(e.payload().value, v) for e, v in zip(led.read(), values))
                assert led.verify().ok
            home.export(tmp / "home-export.jsonl")
            exported = (tmp / "home-export.jsonl").read_bytes()
            assert exported == (tmp / "home" / "events.jsonl").read_bytes()
        for target in (tmp / "copy.jsonl", tmp / "copy-home"):
            with ledger.open_ledger(target) as copy:
                assert copy.import_file(tmp / "home-export.jsonl") == len(values)
                copy.export(tmp / "again.jsonl")
                assert (tmp / "again.jsonl").read_bytes() == exported
                assert all(same(e.data["value"], v) for e, v in zip(copy.read(), values))
                assert copy.verify().ok
