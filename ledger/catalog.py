"""The event catalog: one frozen pydantic payload model per event type, with schema versions.

Register a type with ``@event_type("note.added", schema=1)``. When a payload's shape changes,
bump ``schema`` and register an upcaster from the old version; stored events are never rewritten,
they are upcast when read (``Event.payload()``).
"""

from __future__ import annotations

from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, ValidationError

from evalledger.ledger.type_names import EnvelopeError, check_type_name


class Payload(BaseModel):
    """Base of every event payload: frozen, strict about unknown keys, no NaN."""

    # ser_json_inf_nan="constants": pydantic's JSON mode would turn a NaN inside an ``Any`` field
    # into None without a word; keeping it lets canonical_json refuse it instead.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, ser_json_inf_nan="constants")


_MODELS: dict[str, type[Payload]] = {}
_SCHEMAS: dict[str, int] = {}
_UPCASTERS: dict[tuple[str, int], Callable[[dict], dict]] = {}


class UnknownEventType(EnvelopeError):
    """An event type that is not in the catalog."""


def event_type(name: str, schema: int = 1):
    """Class decorator: register ``cls`` as the payload model of event type ``name``."""
    check_type_name(name)

    def register(cls: type[Payload]) -> type[Payload]:
        existing = _MODELS.get(name)
        if existing is not None and existing.__qualname__ != cls.__qualname__:
            raise ValueError(f"event type {name!r} is already registered to {existing.__qualname__}")
        _MODELS[name] = cls
        _SCHEMAS[name] = schema
        cls.event_type = name  # type: ignore[attr-defined]
        cls.schema_version = schema  # type: ignore[attr-defined]
        return cls

    return register


def upcaster(name: str, from_schema: int):
    """Decorator: register ``fn(data) -> data`` that turns schema ``from_schema`` into the next."""

    def register(fn: Callable[[dict], dict]) -> Callable[[dict], dict]:
        _UPCASTERS[(name, from_schema)] = fn
        return fn

    return register


def payload_model(name: str) -> type[Payload]:
    """The payload model registered for event type ``name``."""
    try:
        return _MODELS[name]
    except KeyError:
        raise UnknownEventType(f"unknown event type {name!r}; known: {', '.join(sorted(_MODELS))}") from None


def schema_version(name: str) -> int:
    """The current schema version of event type ``name``."""
    payload_model(name)
    return _SCHEMAS[name]


def known_types() -> list[str]:
    """Every registered event type name, sorted."""
    return sorted(_MODELS)


def upcast(name: str, schema: int, data: dict) -> dict:
    """Bring a stored payload from ``schema`` up to the type's current schema version."""
    current = schema_version(name)
    while schema < current:
        step = _UPCASTERS.get((name, schema))
        if step is None:
            raise EnvelopeError(f"no upcaster for {name!r} from schema {schema} to {schema + 1}")
        data = step(dict(data))
        schema += 1
    if schema > current:
        raise EnvelopeError(f"{name!r} schema {schema} is newer than this evalledger knows ({current})")
    return data


def validate_payload(name: str, data: Any) -> tuple[int, dict]:
    """Validate ``data`` (a model or dict) for type ``name``: returns (schema, JSON-ready dict)."""
    model = _MODELS.get(name) or payload_model(name)
    if isinstance(data, model):
        instance = data
    elif isinstance(data, BaseModel):
        raise EnvelopeError(f"{name!r} takes a {model.__name__} payload, not {type(data).__name__}")
    else:
        try:
            # The validator and serializer directly: this runs once per appended event.
            instance = model.__pydantic_validator__.validate_python(data)
        except ValidationError as exc:
            raise EnvelopeError(f"invalid {name!r} payload: {exc}") from None
    return _SCHEMAS[name], model.__pydantic_serializer__.to_python(instance, mode="json")
