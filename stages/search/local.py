"""The local search backend: a folder of reference documents indexed with SQLite FTS5, BM25-ranked.

Documents are the ``.md`` and ``.txt`` files under the corpus folder (``<home>/corpus/`` by
default), split into paragraphs. The index lives in memory and is rebuilt when a file is added,
changed or removed (checked by path, size and mtime before each search), so it needs no upkeep
and leaves nothing on disk. Ties in rank are broken by path and paragraph: same corpus, same
query, same results.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
from pathlib import Path

from evalledger.stages.judge.offline.text import STOPWORDS

SUFFIXES = (".md", ".txt")
MAX_PASSAGE = 1500
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


class LocalCorpus:
    """An FTS5 index of a folder's paragraphs."""

    name = "local"

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self._lock = threading.Lock()
        self._signature: tuple | None = None
        self._db: sqlite3.Connection | None = None
        self._content_hash = ""

    @property
    def model(self) -> str:
        """The ranking and the corpus content it ranks: a changed corpus is a different search."""
        with self._lock:
            self._index()
            return f"fts5-bm25:{self._content_hash}"

    def _scan(self) -> tuple:
        if not self.folder.is_dir():
            return ()
        files = sorted(p for p in self.folder.rglob("*") if p.suffix.lower() in SUFFIXES and p.is_file()
                       and not any(part.startswith(".") for part in p.relative_to(self.folder).parts))
        return tuple((str(p.relative_to(self.folder)), p.stat().st_size, p.stat().st_mtime_ns) for p in files)

    def _index(self) -> sqlite3.Connection:
        """The FTS5 index, rebuilt when the folder's files changed."""
        signature = self._scan()
        if self._db is not None and signature == self._signature:
            return self._db
        db = sqlite3.connect(":memory:", check_same_thread=False)
        db.execute("CREATE VIRTUAL TABLE passages USING fts5(title, content, path UNINDEXED, "
                   "part UNINDEXED, tokenize='porter unicode61')")
        rows, digest = [], hashlib.sha256()
        for rel, _, _ in signature:
            raw = (self.folder / rel).read_bytes()
            digest.update(rel.encode() + b"\0" + hashlib.sha256(raw).digest())
            text = raw.decode("utf-8", errors="replace")
            for part, (title, passage) in enumerate(passages(rel, text), 1):
                rows.append((title, passage, rel, part))
        db.executemany("INSERT INTO passages (title, content, path, part) VALUES (?, ?, ?, ?)", rows)
        if self._db is not None:
            self._db.close()
        self._db, self._signature, self._content_hash = db, signature, digest.hexdigest()[:16]
        return db

    def search(self, query: str, max_results: int = 3) -> list[dict[str, str]]:
        """The best ``max_results`` passages for ``query`` by BM25 (title weighted 2x)."""
        match = fts_query(query)
        if not match:
            return []
        with self._lock:
            rows = self._index().execute(
                "SELECT title, content, path, part FROM passages WHERE passages MATCH ? "
                "ORDER BY bm25(passages, 2.0, 1.0), path, part LIMIT ?", (match, max_results)).fetchall()
        return [{"title": title, "content": content, "url": f"corpus/{path}#{part}"}
                for title, content, path, part in rows]


def passages(path: str, text: str) -> list[tuple[str, str]]:
    """(title, passage) pairs: paragraphs under the nearest markdown heading (else the file name)."""
    title = Path(path).stem.replace("_", " ").replace("-", " ")
    heading, out = title, []
    for block in re.split(r"\n\s*\n", text):
        block = block.strip()
        if not block:
            continue
        if block.startswith("#"):
            first, _, rest = block.partition("\n")
            heading = first.lstrip("#").strip() or title
            block = rest.strip()
            if not block:
                continue
        while block:
            out.append((heading, block[:MAX_PASSAGE]))
            block = block[MAX_PASSAGE:]
    return out


def fts_query(query: str) -> str:
    """A safe FTS5 query from free text: its content words, quoted, OR-ed (BM25 ranks the rest)."""
    words = [w for w in (t.lower() for t in _TOKEN.findall(query)) if w not in STOPWORDS and len(w) > 1]
    unique = list(dict.fromkeys(words))[:32]
    return " OR ".join(f'"{w}"' for w in unique)
