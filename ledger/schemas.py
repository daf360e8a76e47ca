"""The registry of event types: payload model, current schema version and upcasters of each.

A module of its own, below both ``envelope`` (whose ``Event`` upcasts what it reads) and
``catalog`` (whose decorators fill it), so neither imports the other. Stored events are never
rewritten: an event stored at an older schema is brought to the current one when it is read.
"""

from __future__ import annotations

from typing import Any, Callable

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]

MODELS: dict[str, type[Any]] = {}
SCHEMAS: dict[str, int] = {}
UPCASTERS: dict[tuple[str, int], Upcaster] = {}


class EnvelopeError(ValueError):
    """An event or payload that cannot be stored (not JSON, NaN, bad type name...)."""


class UnknownEventType(EnvelopeError):
    """An event type that is not in the catalog."""


def payload_model(name: str) -> type[Any]:
    """The payload model registered for event type ``name``."""
    try:
        return MODELS[name]
    except KeyError:
        raise UnknownEventType(f"unknown event type {name!r}; known: {', '.join(sorted(MODELS))}") from None


def schema_version(name: str) -> int:
    """The current schema version of event type ``name``."""
    payload_model(name)
    return SCHEMAS[name]


def known_types() -> list[str]:
    """Every registered event type name, sorted."""
    return sorted(MODELS)


def is_current(name: str, schema: int) -> bool:
    """True when an event of type ``name`` stored at ``schema`` needs no upcasting (the hot path)."""
    return SCHEMAS.get(name) == schema


def upcast(name: str, schema: int, data: Any) -> Any:
    """Bring a stored payload from ``schema`` up to the type's current schema version.

    Each registered step gets a copy of the dict, so a stored event's decoded payload is never
    changed in place. Raises EnvelopeError when a step is missing or the schema is newer than
    this evalledger knows.
    """
    current = schema_version(name)
    if schema > current:
        raise EnvelopeError(f"{name!r} schema {schema} is newer than this evalledger knows ({current})")
    while schema < current:
        step = UPCASTERS.get((name, schema))
        if step is None:
            raise EnvelopeError(f"no upcaster for {name!r} from schema {schema} to {schema + 1}")
        data = step(dict(data))
        schema += 1
    return data
