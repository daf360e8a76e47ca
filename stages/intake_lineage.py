"""Where a benchmark stands among the versions of its name: the lineage its ``benchmark.registered``
carries (version number, the previous version's id, question ids added, removed and changed).

Each registration of new content under a name already registered (same kind) is the next
version, compared with the latest one. The earlier version's questions are read a part at a time
(``benchmark.questions_added``), and the new version's are looked up by id, so a benchmark taken
in from its spool (``intake_stream``) is compared without holding either version whole.
"""

from __future__ import annotations

from typing import Callable, Collection, Iterator

from evalledger.ledger import Event, Ledger, event_id


def latest_version(led: Ledger, name: str, kind: str) -> tuple[int, Event | None]:
    """(how many distinct benchmarks of ``name`` and ``kind`` are registered, the latest one's
    ``benchmark.registered`` event, holding its first part of questions only)."""
    seen: set[str] = set()
    last = None
    for event in led.read(types=["benchmark.registered"]):
        data = event.data
        if data["name"] == name and data["kind"] == kind and data["benchmark"] not in seen:
            seen.add(data["benchmark"])
            last = event
    return len(seen), last


def registration_parts(led: Ledger, head: Event) -> Iterator[list[dict]]:
    """The questions of the registration ``head`` (a ``benchmark.registered`` event, its parts not
    joined), a part at a time, in order: its own, then each ``benchmark.questions_added``'s."""
    yield head.data.get("questions") or []
    bid = head.data["benchmark"]
    for number in range(1, head.data.get("question_parts") or 1):
        part = led.get(event_id(head.stream, "benchmark.questions_added", f"{bid}:questions:{number}"))
        assert part is not None, "a registration's parts are appended in its batch"
        yield part.data["questions"]


def lineage(led: Ledger, latest: tuple[int, Event | None], ids: Collection[str],
            question: Callable[[str], dict]) -> dict:
    """The lineage of a new benchmark whose question ids are ``ids`` and whose question of an id is
    ``question(id)``, given ``latest_version`` of its name and kind; ``{}`` for a first version."""
    count, last = latest
    if last is None:
        return {}
    before: set[str] = set()
    changed: set[str] = set()
    for earlier in (q for part in registration_parts(led, last) for q in part):
        qid = earlier["id"]
        before.add(qid)
        if qid in ids and question(qid) != earlier:
            changed.add(qid)
    after = set(ids)
    changes = {"added": sorted(after - before), "removed": sorted(before - after), "changed": sorted(changed)}
    return {"version": count + 1, "previous": last.data["benchmark"], "changes": changes}
