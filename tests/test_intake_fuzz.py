"""Arbitrary JSON anywhere in a valid file: intake either registers it or rejects it with places;
it never crashes and never leaves a half-registered file."""

from __future__ import annotations

import copy
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalledger import ledger
from evalledger.stages.formats import FileRejected, parse
from evalledger.stages.intake import ingest_bytes
from intake_support import KARENINA, SAMPLES

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**63, max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12)

DOCUMENTS = {
    "benchmark": json.loads((SAMPLES / "pharmacology.benchmark.json").read_text()),
    "karenina": json.loads((KARENINA / "with_rubrics.jsonld").read_text()),
    "reconstruction": json.loads((SAMPLES / "polio-vaccine-1955.reconstruction.json").read_text()),
}


def places(value, path=()):
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from places(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from places(item, path + (index,))


PLACES = [(name, path) for name, doc in DOCUMENTS.items() for path in places(doc) if path]


def mutated(name: str, path: tuple, value) -> bytes:
    doc = copy.deepcopy(DOCUMENTS[name])
    node = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return json.dumps(doc).encode()


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PLACES), JSON_VALUES)
def test_any_value_anywhere_is_read_or_rejected_with_places(place, value):
    try:
        parse(mutated(*place, value), "fuzz.json")
    except FileRejected as exc:
        assert exc.problems and all(p.where and p.reason for p in exc.problems)


def test_fuzzed_files_leave_a_ledger_that_verifies_with_whole_batches(tmp_path):
    led = ledger.open_ledger(tmp_path / "home")

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.sampled_from(PLACES), JSON_VALUES)
    def check(place, value):
        before = led.head().seq
        result = ingest_bytes(led, mutated(*place, value), "fuzz.json")
        new = [e.type for e in led.read(from_seq=before + 1)]
        if result.status == "rejected":
            assert new in ([], ["benchmark.rejected"])
        else:
            assert new == [] or new[0] == "file.received"
    check()
    assert led.verify().ok
