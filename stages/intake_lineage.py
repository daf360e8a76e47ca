"""Where a benchmark stands among the versions of its name: the lineage its ``benchmark.registered``
carries (version number, the previous version's id, question ids added, removed and changed).

Each registration of new content under a name already registered (same kind) is the next
version, compared with the latest one. The earlier version's questions are read a part at a time
(``benchmark.questions_added``), and the new version's are looked up by id, so a benchmark taken
in from its spool (``intake_stream``) is compared without holding either version whole.
"""

from __future__ import annotations

from typing import Callable, Collection, Iterator

from evalledger.ledger import Event, Ledger


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


def registered_questions(led: Ledger, registration: Event) -> Iterator[dict]:
    """Every question of a registration in order: its own, then those of its parts, one part read at a time."""
    yield from registration.data.get("questions") or []
    if (registration.data.get("question_parts") or 1) == 1:
        return
    held: dict[int, list[dict]] = {}   # parts read before an earlier one (they are stored in order)
    following = 1
    for part in led.read(types=["benchmark.questions_added"], stream=registration.stream):
        held[part.data["part"]] = part.data["questions"]
        while following in held:
            yield from held.pop(following)
            following += 1


def lineage(led: Ledger, latest: tuple[int, Event | None], ids: Collection[str],
            question: Callable[[str], dict]) -> dict:
    """The lineage of a new benchmark whose question ids are ``ids`` and whose question of an id is
    ``question(id)``, given ``latest_version`` of its name and kind; ``{}`` for a first version."""
    count, last = latest
    if last is None:
        return {}
    before: set[str] = set()
    changed: set[str] = set()
    for earlier in registered_questions(led, last):
        qid = earlier["id"]
        before.add(qid)
        if qid in ids and question(qid) != earlier:
            changed.add(qid)
    after = set(ids)
    changes = {"added": sorted(after - before), "removed": sorted(before - after), "changed": sorted(changed)}
    return {"version": count + 1, "previous": last.data["benchmark"], "changes": changes}
