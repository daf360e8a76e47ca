"""The event catalog: one frozen pydantic payload model per event type, with schema versions.

Register a type with ``@event_type("note.added", schema=1)``. When a payload's shape changes,
bump ``schema`` and register an upcaster from the old version; stored events are never rewritten,
they are upcast when read: ``Event.data`` is the payload at the current schema, ``Event.payload()``
the same as its model, on every read path of every backend (the registry is ``ledger.schemas``).
"""

from __future__ import annotations

from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, ValidationError

from evalledger.ledger.envelope import check_type_name
from evalledger.ledger.schemas import MODELS as _MODELS
from evalledger.ledger.schemas import SCHEMAS as _SCHEMAS
from evalledger.ledger.schemas import UPCASTERS as _UPCASTERS
from evalledger.ledger.schemas import EnvelopeError as EnvelopeError  # re-exported: the catalog's names
from evalledger.ledger.schemas import UnknownEventType as UnknownEventType
from evalledger.ledger.schemas import Upcaster
from evalledger.ledger.schemas import known_types as known_types
from evalledger.ledger.schemas import payload_model as payload_model
from evalledger.ledger.schemas import schema_version as schema_version
from evalledger.ledger.schemas import upcast as upcast


class Payload(BaseModel):
    """Base of every event payload: frozen, strict about unknown keys, no NaN."""

    # ser_json_inf_nan="constants": pydantic's JSON mode would turn a NaN inside an ``Any`` field
    # into None without a word; keeping it lets canonical_json refuse it instead.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, ser_json_inf_nan="constants")


def event_type(name: str, schema: int = 1) -> Callable[[type[Payload]], type[Payload]]:
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


def upcaster(name: str, from_schema: int) -> Callable[[Upcaster], Upcaster]:
    """Decorator: register ``fn(data) -> data`` that turns schema ``from_schema`` into the next."""

    def register(fn: Upcaster) -> Upcaster:
        _UPCASTERS[(name, from_schema)] = fn
        return fn

    return register


def validate_payload(name: str, data: Any) -> tuple[int, dict[str, Any]]:
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
