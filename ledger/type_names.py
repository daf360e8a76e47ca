"""Event type names and the envelope's error, below both the envelope and the catalog.

The catalog checks the names it registers and the envelope the names it stores; keeping the
check here lets the envelope use the catalog (upcasting on read) without a circular import.
"""

from __future__ import annotations

import re

_TYPE_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")


class EnvelopeError(ValueError):
    """An event or payload that cannot be stored (not JSON, NaN, bad type name...)."""


def check_type_name(type: str) -> None:
    """Refuse a type name that is not a dotted lowercase name such as ``note.added``."""
    if not isinstance(type, str) or not _TYPE_NAME.match(type):
        raise EnvelopeError(f"event type {type!r} is not a dotted lowercase name like 'note.added'")
