"""Reading events a page at a time, every backend alike: pages bounded in rows and in bytes.

A page is fetched whole (no read transaction stays open between pages) and holds at most
``most`` rows and about ``page_bytes`` bytes of payload: a home whose events are large (a big
benchmark's registration parts, a megabyte each) is read a few rows at a time, so a read's memory
does not depend on how large its events are. The first page is short, to learn how large they are.
"""

from __future__ import annotations

from itertools import islice
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

PAGE_BYTES = 1 << 21   # payload bytes a page holds at most, about (one event may be more)
FIRST_PAGE = 4         # rows of the first page: a big registration's parts are 1 MB each

Page = TypeVar("Page", bound=Sequence[tuple[Any, ...]])
Item = TypeVar("Item")


def row_pages(fetch: Callable[[int, int], Page], from_seq: int, most: int,
              data_column: int = 6, page_bytes: int = PAGE_BYTES) -> Iterator[Page]:
    """The pages ``fetch(after_seq, limit)`` gives (rows in seq order, seq first, the stored
    payload at ``data_column``), from ``from_seq`` on, each at most ``most`` rows and, after the
    first, sized by the payload bytes of the page before it."""
    last, limit = from_seq - 1, min(FIRST_PAGE, most)
    while True:
        rows = fetch(last, limit)
        if rows:
            yield rows
        if len(rows) < limit:
            return
        last = rows[-1][0]
        size = sum([len(row[data_column]) for row in rows])
        limit = min(most, max(1, len(rows) * page_bytes // max(1, size)))


def row_chunks(rows: Iterable[tuple[Any, ...]], most: int, data_column: int = 6) -> Iterator[list[tuple[Any, ...]]]:
    """Rows already fetched (an iterator), in lists sized as ``row_pages`` sizes pages: at most
    ``most`` rows and, after a short first one, about ``PAGE_BYTES`` of payload."""
    taken = iter(rows)
    return row_pages(lambda _after, limit: list(islice(taken, limit)), 1, most, data_column)


def sized_batches(items: Iterable[Item], weight: Callable[[Item], int], most_weight: int,
                  most_count: int | None = None) -> Iterator[list[Item]]:
    """``items`` in order, in lists of at most ``most_count`` items and about ``most_weight`` in
    all (``weight`` of each; an item heavier than that is a list of its own), made as taken."""
    batch: list[Item] = []
    size = 0
    for item in items:
        heavy = weight(item)
        if batch and ((most_count is not None and len(batch) >= most_count) or size + heavy > most_weight):
            yield batch
            batch, size = [], 0
        batch.append(item)
        size += heavy
    if batch:
        yield batch
