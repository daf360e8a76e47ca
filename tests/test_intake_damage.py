"""Damaged files (hypothesis): each is rejected naming the place, the ledger gains only
``benchmark.rejected``, and the ledger still verifies."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Iterator

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalledger import ledger
from evalledger.stages.formats.errors import join_path
from evalledger.stages.intake import ingest_path
from intake_support import SAMPLES

SAMPLE = json.loads((SAMPLES / "pharmacology.benchmark.json").read_text())
AUDIT_TEXT = (SAMPLES / "verifyfast-cases.audit.jsonl").read_text()
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def nodes(value: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    """Every (path, value) of a JSON document, the root included."""
    yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from nodes(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from nodes(item, path + (index,))


PLACES = [(p, v) for p, v in nodes(SAMPLE) if v is not None]
LEAVES = [(p, v) for p, v in PLACES if not isinstance(v, (dict, list))]


def replaced(path: tuple, value: Any) -> dict:
    """A copy of the sample with the node at ``path`` replaced."""
    doc = copy.deepcopy(SAMPLE)
    if not path:
        return value
    node = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return doc


def wrong_type(value: Any) -> Any:
    """A value of a type the schema never accepts where ``value`` stands."""
    if isinstance(value, bool):
        return [1]
    if isinstance(value, (int, float)):
        return "x"
    if isinstance(value, str):
        return 7
    if isinstance(value, list):
        return {"a": 1}
    return []


class Inbox:
    """A home whose inbox receives damaged files; checks what each one did to the ledger."""

    def __init__(self, root: Path):
        self.home = ledger.init_home(root / "home")
        self.led = ledger.open_ledger(self.home)
        self.count = 0

    def reject(self, raw: bytes, suffix: str = ".json") -> list[dict]:
        """Drop ``raw`` in the inbox and ingest it: it must be rejected with only benchmark.rejected."""
        self.count += 1
        path = self.home / "inbox" / f"damaged-{self.count}{suffix}"
        path.write_bytes(raw)
        before = self.led.head().seq
        result = ingest_path(self.led, path, from_inbox=True)
        new = [e.type for e in self.led.read(from_seq=before + 1)]
        assert result.status == "rejected", raw[:200]
        assert new in ([], ["benchmark.rejected"])  # [] when the same bytes were rejected before
        assert result.errors and all(e["where"] and e["reason"] for e in result.errors)
        assert not path.exists() and Path(f"{result.moved_to}.error.txt").exists()
        assert self.led.verify().ok
        return result.errors


def names(errors: list[dict], path: tuple) -> bool:
    """Some error names the damaged place (or the object holding it, or a place inside it)."""
    where = join_path("$", path)
    return any(where.startswith(e["where"]) or e["where"].startswith(where) for e in errors)


def test_truncated_json(tmp_path):
    inbox = Inbox(tmp_path)
    raw = (SAMPLES / "pharmacology.benchmark.json").read_bytes().rstrip()

    def expect(cut: int) -> None:
        [error] = inbox.reject(raw[:cut])
        try:
            raw[:cut].decode("utf-8")
        except UnicodeDecodeError as exc:   # cut inside a character (the sample has "μ"): its byte is named
            line = raw[:cut].count(b"\n") + 1
            assert error["where"] == f"line {line}, byte {exc.start}"
        else:
            assert error["where"].startswith("line ") and ", column " in error["where"]

    expect(raw.index("μ".encode()) + 1)   # always one cut inside a character, not only when drawn

    @SETTINGS
    @given(st.integers(min_value=1, max_value=len(raw) - 1))
    def check(cut):
        expect(cut)
    check()


def test_truncated_jsonl(tmp_path):
    inbox = Inbox(tmp_path)
    raw = AUDIT_TEXT.encode()
    cuts = [i for i in range(1, len(raw)) if raw[i - 1:i] not in (b"}", b"\n")]

    @SETTINGS
    @given(st.sampled_from(cuts))
    def check(cut):
        errors = inbox.reject(raw[:cut], ".jsonl")
        last_line = raw[:cut].count(b"\n") + 1
        assert any(e["where"].startswith(f"line {last_line}") for e in errors)
    check()


def test_wrong_types(tmp_path):
    inbox = Inbox(tmp_path)

    @SETTINGS
    @given(st.sampled_from(PLACES))
    def check(place):
        path, value = place
        errors = inbox.reject(json.dumps(replaced(path, wrong_type(value))).encode())
        assert names(errors, path), (path, errors)
    check()


def test_huge_numbers(tmp_path):
    inbox = Inbox(tmp_path)

    @SETTINGS
    @given(st.sampled_from(LEAVES), st.sampled_from(["1" + "0" * 30, "-" + "9" * 25, "1e400", "-1e999"]))
    def check(place, number):
        path, _ = place
        text = json.dumps(replaced(path, "@@HUGE@@")).replace('"@@HUGE@@"', number)
        errors = inbox.reject(text.encode())
        assert [e["where"] for e in errors] == [join_path("$", path)]
    check()


def test_invalid_utf8(tmp_path):
    inbox = Inbox(tmp_path)
    raw = (SAMPLES / "pharmacology.benchmark.json").read_bytes()
    ascii_gaps = [i for i in range(len(raw)) if raw[i] < 0x80 and (i == 0 or raw[i - 1] < 0x80)]

    @SETTINGS
    @given(st.sampled_from(ascii_gaps), st.sampled_from([b"\xff", b"\x80", b"\xc0\xaf", b"\xed\xa0\x80"]))
    def check(at, bad):
        [error] = inbox.reject(raw[:at] + bad + raw[at:])
        line = raw[:at].count(b"\n") + 1
        assert error["where"] == f"line {line}, byte {at}"
        assert "not valid UTF-8" in error["reason"]
    check()


def test_deep_nesting(tmp_path):
    inbox = Inbox(tmp_path)

    @SETTINGS
    @given(st.sampled_from(PLACES), st.integers(min_value=65, max_value=400), st.booleans())
    def check(place, depth, as_lists):
        path, value = place
        for _ in range(depth):
            value = [value] if as_lists else {"x": value}
        errors = inbox.reject(json.dumps(replaced(path, value)).encode())
        assert any(e["where"].startswith(join_path("$", path)) and "nesting deeper" in e["reason"] for e in errors)
    check()


def _duplicates() -> list[tuple[str, tuple, tuple]]:
    """(what, list path, index) of every list whose items carry an id or name that must be unique."""
    out = []
    out += [("question", ("questions",), i) for i in range(len(SAMPLE["questions"]))]
    out += [("response", ("responses",), i) for i in range(len(SAMPLE["responses"]))]
    for qi, q in enumerate(SAMPLE["questions"]):
        out += [("field", ("questions", qi, "template", "fields"), i) for i in range(len(q["template"]["fields"]))]
        if q.get("rubric"):
            out += [("trait", ("questions", qi, "rubric", "traits"), i) for i in range(len(q["rubric"]["traits"]))]
    return out


def test_duplicate_ids(tmp_path):
    inbox = Inbox(tmp_path)

    @SETTINGS
    @given(st.sampled_from(_duplicates()))
    def check(target):
        what, path, index = target
        doc = copy.deepcopy(SAMPLE)
        items = doc
        for part in path:
            items = items[part]
        items.append(copy.deepcopy(items[index]))
        errors = inbox.reject(json.dumps(doc).encode())
        duplicate_at = join_path("$", path + (len(items) - 1,))
        assert any(e["where"].startswith(duplicate_at) for e in errors), (what, errors)
    check()


AUDIT_ROWS = [json.loads(line) for line in AUDIT_TEXT.splitlines()]
AUDIT_PLACES = [(n, key) for n, row in enumerate(AUDIT_ROWS, start=1) for key in row]


def test_wrong_types_in_audit_lines(tmp_path):
    inbox = Inbox(tmp_path)

    @SETTINGS
    @given(st.sampled_from(AUDIT_PLACES))
    def check(place):
        number, key = place
        rows = copy.deepcopy(AUDIT_ROWS)
        value = rows[number - 1][key]
        rows[number - 1][key] = [value] if key == "id" else wrong_type(value)  # an id may be int or text
        text = "".join(json.dumps(row) + "\n" for row in rows)
        errors = inbox.reject(text.encode(), ".jsonl")
        assert any(e["where"] == f"line {number}: $.{key}" for e in errors), errors
    check()


RECONSTRUCTION = json.loads((SAMPLES / "polio-vaccine-1955.reconstruction.json").read_text())
RECONSTRUCTION_PLACES = [(p, v) for p, v in nodes(RECONSTRUCTION) if p and p != ("format",)]


def test_wrong_types_in_a_reconstruction(tmp_path):
    inbox = Inbox(tmp_path)

    @SETTINGS
    @given(st.sampled_from(RECONSTRUCTION_PLACES))
    def check(place):
        path, value = place
        doc = copy.deepcopy(RECONSTRUCTION)
        node = doc
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = wrong_type(value)
        errors = inbox.reject(json.dumps(doc).encode())
        assert names(errors, path), (path, errors)
    check()
