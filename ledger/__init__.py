"""evalledger's event store: immutable, hash-chained events in SQLite and JSONL.

The public API (see ``ledger.api`` and, for homes and opening, ``ledger.home``)::

    open_ledger(path, durability="normal", readonly=False, mirror="jsonl") -> Ledger   # a home, .jsonl, .db
    init_home(home, store=None, mirror="jsonl"); bind_store(home, url); store_of(home)   # store: PostgreSQL
    check_store_binding(home, url)   # what bind_store would refuse, refused with nothing written
    mirror_form(led) -> "jsonl" | "gzip"   # a home's mirror: events.jsonl, or events.jsonl.gz (init --mirror gzip)
    Ledger.append(events, expected_version=None, tracking=None) -> list[Event]
    Ledger.append_many(events, seen=None) -> int   # one atomic batch, stored a chunk at a time
    stored_payload(event, where) -> StoredPayload   # NewEvent.data copying a read event's stored bytes
    Ledger.read(from_seq=1, types=None, stream=None, to_seq=None) -> Iterator[Event]
    Ledger.head() -> Head; Ledger.verify(expect_head=None) -> VerifyReport
    Ledger.export(out); Ledger.import_file(path)
    Ledger.tracking_position(name); Ledger.set_tracking(name, position)
    Ledger.scan(from_seq, to_seq, types, stamped=(), timed=(), resolve=True, plain=False) -> Iterator[ScanRow]   # the folds' raw read
    Ledger.join(value); Ledger.open(value)   # a scanned part's blob references: resolved whole / one level
    Ledger.home, .path, .location, .label, .read_models_path()

``Event.data`` and ``Event.payload()`` are at each type's current schema on every read path
(upcast from the stored one); ``Event.stored_data`` and the stored bytes stay as written.
"""

from evalledger.ledger.api import Ledger, parse_head
from evalledger.ledger.blobs import stored_part
from evalledger.ledger.catalog import Payload, event_type, known_types, payload_model, schema_version, upcaster
from evalledger.ledger.envelope import EnvelopeError, Event, NewEvent, canonical_json, decode_json, event_id
from evalledger.ledger.home import (
    bind_store,
    check_store_binding,
    default_home,
    init_home,
    is_home,
    mirror_form,
    open_ledger,
    store_of,
)
from evalledger.ledger.importer import ImportRefused
from evalledger.ledger.persistence import (
    ConflictError,
    DiskFull,
    EmptyStore,
    Head,
    LedgerError,
    ScanRow,
    StoredPayload,
    StoreReplaced,
    stored_payload,
)
from evalledger.ledger.verify import Problem, VerifyReport

__all__ = [
    "ConflictError", "DiskFull", "EmptyStore", "EnvelopeError", "bind_store", "check_store_binding", "store_of", "Event", "Head", "ImportRefused",
    "Ledger", "LedgerError", "NewEvent",
    "Payload",
    "Problem", "ScanRow", "StoredPayload", "StoreReplaced", "VerifyReport", "canonical_json", "decode_json", "default_home", "event_id", "event_type", "init_home",
    "is_home", "known_types", "mirror_form", "open_ledger", "parse_head", "payload_model", "schema_version",
    "stored_part", "stored_payload", "upcaster",
]
