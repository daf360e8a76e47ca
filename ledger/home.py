"""A home folder: making one, knowing one, binding it to a PostgreSQL store, and opening the ledger at a path.

A home is a directory holding ledger.db and its mirror (events.jsonl, or events.jsonl.gz), or a
store.url naming a PostgreSQL store, with the folders inbox/, processed/, rejected/ and reports/.
``open_ledger`` also opens a bare ``.jsonl`` or ``.db`` ledger file, or a ``postgresql://`` URL. The
ledger it returns is ``ledger.api.Ledger``.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from evalledger.ledger.api import Ledger
from evalledger.ledger.gz_members import is_gz_mirror
from evalledger.ledger.jsonl import JSONLRecorder
from evalledger.ledger.lost_store import refuse_if_lost
from evalledger.ledger.mirror_gz import GZ_MIRROR
from evalledger.ledger.persistence import LedgerError
from evalledger.ledger.postgres_schema import is_store_url, redact_url, split_store_url
from evalledger.ledger.row_codec import ROWS_FORMS, is_compact
from evalledger.ledger.sqlite import SQLiteRecorder
from evalledger.ledger.sqlite_schema import connect

HOME_FOLDERS = ("inbox", "processed", "rejected", "reports")
LEDGER_FILE_SUFFIXES = (".jsonl", ".db", ".sqlite", ".sqlite3")
#: in a home whose events live in PostgreSQL: the store's URL (no password), and the local read models
STORE_FILE = "store.url"
#: the mirror a home keeps beside its ledger.db, by form (``init --mirror``)
MIRROR_FILES = {"jsonl": "events.jsonl", "gzip": GZ_MIRROR}
READ_MODELS_FILE = "read-models.db"


def default_home() -> str:
    """The home named by EVALLEDGER_HOME, else ``./evalledger``."""
    return os.environ.get("EVALLEDGER_HOME") or "evalledger"


def init_home(home: str | os.PathLike[str], store: str | None = None, mirror: str = "jsonl",
              rows: str = "text") -> Path:
    """Create a home's layout (DESIGN.md): ledger.db, events.jsonl, inbox/, processed/, rejected/, reports/.

    With ``store`` (a ``postgresql://`` URL) the events live in that database instead: the home
    keeps its folders, ``store.url`` naming the store, and ``read-models.db`` (``bind_store``).
    ``mirror="gzip"``: a new home keeps its mirror compressed, as ``events.jsonl.gz``.
    ``rows="compact"``: a new home's ledger.db stores its events in compact rows (ledger/row_codec.py).
    """
    home = Path(home)
    check_mirror_form(home, mirror)
    check_rows_form(home, store, rows)
    if store is not None:
        bind_store(home, store)
    if home.exists() and not home.is_dir() and home.suffix not in LEDGER_FILE_SUFFIXES:
        raise LedgerError(f"{home} is a file, not a home directory; choose another --home")
    if home.suffix in LEDGER_FILE_SUFFIXES:  # a bare ledger file: no folders around it
        open_ledger(home, rows=rows).close()
        return home
    home.mkdir(parents=True, exist_ok=True)
    for name in HOME_FOLDERS:
        (home / name).mkdir(exist_ok=True)
    open_ledger(home, mirror=mirror, rows=rows).close()
    return home


def mirror_form(led: "Ledger") -> str:
    """The mirror a ledger keeps: "gzip" for a home with ``events.jsonl.gz``, else "jsonl"."""
    mirror = led.recorder.mirror
    return "gzip" if mirror is not None and is_gz_mirror(mirror.path) else "jsonl"


def check_mirror_form(home: Path, mirror: str) -> None:
    """Refuse a mirror form that is not one, or a compressed mirror for a home made without one
    (a home keeps the mirror it was made with: changing it would rewrite the mirror)."""
    if mirror not in MIRROR_FILES:
        raise LedgerError(f"the mirror is 'jsonl' or 'gzip', not {mirror!r}")
    if mirror == "gzip" and (home / "ledger.db").exists() and not (home / GZ_MIRROR).exists():
        raise LedgerError(f"{home} was made with a plain mirror ({MIRROR_FILES['jsonl']}); it keeps it")


def check_rows_form(home: Path, store: str | None, rows: str) -> None:
    """Refuse compact rows for a PostgreSQL store or for a ledger.db made with text rows (a store keeps
    the rows form it was made with: ``migrate --rows compact`` copies it into a new one)."""
    if rows not in ROWS_FORMS:
        raise LedgerError(f"rows are 'text' or 'compact', not {rows!r}")
    if rows != "compact":
        return
    if store is not None or store_of(home) is not None or home.suffix == ".jsonl":
        raise LedgerError("compact rows are a form of ledger.db; a PostgreSQL store or a JSONL file keeps its own")
    db = home if home.suffix in LEDGER_FILE_SUFFIXES else home / "ledger.db"
    if db.exists():
        conn = connect(str(db), readonly=True)
        try:
            compact = is_compact(conn)
        finally:
            conn.close()
        if not compact:
            raise LedgerError(f"{db} was made with text rows; it keeps them ('evalledger migrate --to NEW "
                              "--rows compact' copies it into a new home with compact rows)")


def mirror_file(home: Path, mirror: str = "jsonl") -> Path:
    """A home's mirror: ``events.jsonl.gz`` when the home has one (or ``mirror`` asks for it in a new
    home, which gets the file now, before its ledger.db), else ``events.jsonl``."""
    gz = home / GZ_MIRROR
    if mirror == "gzip" and not (home / "ledger.db").exists():
        check_mirror_form(home, mirror)
        gz.touch()
    return gz if gz.exists() else home / MIRROR_FILES["jsonl"]


def is_home(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a directory holding a ledger.db (or a store.url naming a server store)."""
    return (Path(path) / "ledger.db").is_file() or (Path(path) / STORE_FILE).is_file()


def store_of(home: str | os.PathLike[str]) -> str | None:
    """The PostgreSQL store URL a home is bound to, or None (its events are in its ledger.db)."""
    try:
        text = (Path(home) / STORE_FILE).read_text(encoding="utf-8").strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not is_store_url(text):
        raise LedgerError(f"{Path(home) / STORE_FILE}: line 1: not a postgresql:// URL")
    return text


def bind_store(home: str | os.PathLike[str], url: str) -> Path:
    """Make ``home`` a home whose events live in the PostgreSQL store ``url``; returns the home.

    Creates the folders and writes ``store.url``, once the store was reached (and its tables made):
    a home bound to a store it cannot reach made every later command fail, so an unreachable store
    raises LedgerError naming it (never its password) and leaves the home as it was. A URL with a
    password is refused (the file would keep it): give the password in PGPASSWORD or ~/.pgpass,
    which libpq reads. A home that holds events of its own (ledger.db) or is bound to another store
    is refused too.
    """
    home = Path(home)
    bound = check_store_binding(home, url)
    if bound is None:
        _reach_store(home, url)
        home.mkdir(parents=True, exist_ok=True)
        for name in HOME_FOLDERS:
            (home / name).mkdir(exist_ok=True)
        (home / STORE_FILE).write_text(url + "\n", encoding="utf-8")
    return home


def _reach_store(home: Path, url: str) -> None:
    """Open the store ``url`` for writing (making its tables) and close it; LedgerError, saying the
    home is left as it was, when it cannot be."""
    from evalledger.ledger.postgres import PostgresRecorder  # only a PostgreSQL store needs it
    try:
        PostgresRecorder(url).close()
    except LedgerError as exc:
        raise LedgerError(f"{exc}\n{home} was left as it was (not bound to {redact_url(url)})") from None


def check_store_binding(home: str | os.PathLike[str], url: str) -> str | None:
    """Refuse (LedgerError, saying why) what ``bind_store`` refuses, writing nothing: a ledger file,
    a URL that is no ``postgresql://`` URL or holds a password, a home bound to another store or
    holding its own ledger.db. Returns the store the home is bound to already (None: not bound)."""
    home = Path(home)
    if home.suffix in LEDGER_FILE_SUFFIXES:
        raise LedgerError(f"{home} names a ledger file; a PostgreSQL store is bound to a home directory")
    if not is_store_url(url):
        raise LedgerError(f"--store {redact_url(url)}: not a postgresql:// URL")
    split_store_url(url)  # a bad schema name fails here
    if urlsplit(url).password is not None:
        raise LedgerError(f"--store {redact_url(url)}: a password in the URL would be written to "
                          f"{home / STORE_FILE}; give it in PGPASSWORD or ~/.pgpass instead")
    bound = store_of(home)
    if bound is not None and bound != url:
        raise LedgerError(f"{home} is bound to the store {bound}, not {url}; use another --home")
    if (home / "ledger.db").exists():
        raise LedgerError(f"{home} keeps its events in {home / 'ledger.db'}; a PostgreSQL store needs a new "
                          "home (export this one and import it there)")
    return bound


def open_ledger(path: str | os.PathLike[str] | None = None, *, durability: str = "normal",
                readonly: bool = False, mirror: str = "jsonl", rows: str = "text") -> Ledger:
    """Open a ledger: a home directory (SQLite + events.jsonl mirror), a ``.jsonl`` file, or a ``.db``.

    A home bound to a PostgreSQL store (``bind_store``) opens that store; a ``postgresql://`` URL
    opens the store alone (no home: export, import, verify, but no read models).

    A home that does not exist is created (``init_home``) unless ``readonly``. Opening for
    writing recovers from a crash (completes a mirror that is behind, rolls an interrupted JSONL
    batch forward, cuts a torn last line); ``readonly`` changes nothing on disk, so ``verify``
    reports what it finds instead of repairing it. ``mirror="gzip"``: a home made by this call keeps
    its mirror compressed (``events.jsonl.gz``); an existing home keeps the mirror it has.
    ``rows="compact"``: a ledger.db made by this call stores compact rows; an existing one keeps its form.
    """
    if isinstance(path, str) and is_store_url(path):  # a store without a home: no read models
        from evalledger.ledger.postgres import PostgresRecorder  # only a PostgreSQL store needs it
        return Ledger(PostgresRecorder(path, readonly=readonly))
    path = Path(path if path is not None else default_home())
    store = store_of(path)
    if store is not None:
        from evalledger.ledger.postgres import PostgresRecorder
        return Ledger(PostgresRecorder(store, str(path / READ_MODELS_FILE), readonly=readonly), home=path)
    if path.suffix == ".jsonl":
        return Ledger(JSONLRecorder(str(path), durability, readonly=readonly))
    if path.suffix in (".db", ".sqlite", ".sqlite3"):
        if readonly and not path.exists():
            raise LedgerError(f"{path}: no such ledger file")
        return Ledger(SQLiteRecorder(str(path), durability, readonly=readonly, rows=rows))
    if not (path / "ledger.db").exists():
        refuse_if_lost(str(path / "ledger.db"), str(mirror_file(path)))   # not "no home here": its ledger.db is gone
        if readonly:
            raise LedgerError(f"{path}: no evalledger home here (run 'evalledger --home {path} init' first)")
        path.mkdir(parents=True, exist_ok=True)
        for name in HOME_FOLDERS:
            (path / name).mkdir(exist_ok=True)
    check_mirror_form(path, mirror)
    mirror_path = str(mirror_file(path, "jsonl" if readonly else mirror))
    recorder = SQLiteRecorder(str(path / "ledger.db"), durability, mirror_path=mirror_path,
                              lock_path=str(path / "ledger.lock"), readonly=readonly, rows=rows)
    return Ledger(recorder, home=path)
