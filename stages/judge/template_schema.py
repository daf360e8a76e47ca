"""The parse role's schema: a template's fields as a pydantic model (and so a JSON schema).

Field types are those of FORMATS.md: bool, int, float, str, list[str], literal (with ``values``)
and date. Every field may be null: "use null for information not present in the response".
"""

from __future__ import annotations

import datetime as _dt
import json
from functools import lru_cache
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

_SIMPLE = {"bool": bool, "int": int, "float": float, "str": str, "list[str]": list[str], "date": _dt.date}


def python_type(type_name: str | None, values: list[Any] | None = None) -> Any:
    """The Python type of a template field type name (unknown names parse as str)."""
    if type_name == "literal":
        if not values:
            raise ValueError("a literal field needs its list of values")
        return Literal[tuple(values)]  # type: ignore[misc]
    return _SIMPLE.get((type_name or "str").strip(), str)


def _freeze(values: list[Any] | None) -> tuple | None:
    return tuple(values) if values is not None else None


@lru_cache(maxsize=256)
def _model_for(spec: tuple[tuple[str, str | None, str, tuple | None], ...]) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for name, type_name, description, values in spec:
        annotation = Optional[python_type(type_name, list(values) if values is not None else None)]
        fields[name] = (annotation, Field(..., description=description or None))
    return create_model("TemplateAnswer", __config__=ConfigDict(extra="ignore"), **fields)


def template_model(fields) -> type[BaseModel]:
    """A pydantic model with one nullable, required attribute per template field."""
    return _model_for(tuple((f.name, f.type, f.description, _freeze(f.values)) for f in fields))


def template_schema(fields) -> dict[str, Any]:
    """The JSON schema the parse role answers in: ``{field: value or null, ...}``."""
    return _schema_of(template_model(fields))


@lru_cache(maxsize=256)
def _schema_of(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()


def template_schema_text(fields) -> str:
    """``template_schema`` as the parse prompt shows it: JSON, sorted keys, indented by two."""
    return _schema_text(template_model(fields))


@lru_cache(maxsize=256)
def _schema_text(model: type[BaseModel]) -> str:
    # json.dumps with an indent runs in pure Python: once per template, not once per case
    return json.dumps(_schema_of(model), indent=2, ensure_ascii=False, sort_keys=True)


_JSON_TYPES = {"bool": "boolean", "int": "integer", "float": "number", "str": "string"}


def _value_schema(type_name: str | None, values: tuple | None) -> dict[str, Any]:
    """The strict JSON schema of one field's non-null value."""
    name = (type_name or "str").strip()
    if name == "literal":
        return _enum_schema(list(values or ()))
    if name == "list[str]":
        return {"type": "array", "items": {"type": "string"}}
    if name == "date":
        return {"type": "string", "format": "date"}
    return {"type": _JSON_TYPES.get(name, "string")}


def _enum_schema(values: list[Any]) -> dict[str, Any]:
    """A literal field's values, one enum per JSON type (strict mode types every enum)."""
    by_type: dict[str, list[Any]] = {}
    for value in values:
        kind = ("boolean" if isinstance(value, bool) else "integer" if isinstance(value, int)
                else "number" if isinstance(value, float) else "string")
        by_type.setdefault(kind, []).append(value if kind != "string" else str(value))
    options = [{"type": kind, "enum": found} for kind, found in by_type.items()]
    return options[0] if len(options) == 1 else {"anyOf": options}


@lru_cache(maxsize=256)
def _strict_schema(spec: tuple[tuple[str, str | None, str, tuple | None], ...]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for name, type_name, description, values in spec:
        if name in properties:
            continue
        field = {"anyOf": [_value_schema(type_name, values), {"type": "null"}]}
        if description:
            field["description"] = description
        properties[name] = field
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def strict_template_schema(fields) -> dict[str, Any]:
    """The parse role's strict reply schema: every field required, typed, and nullable.

    Cached by the fields' names, types, descriptions and values; the result is shared (read-only).
    """
    return _strict_schema(tuple((f.name, f.type, f.description, _freeze(f.values)) for f in fields))


def check_parsed(request, reply):
    """Validate a parse reply against the request's fields, returning the typed values as JSON.

    Raises ValueError listing every field that is missing or of the wrong type, so the judge can
    be asked again with that feedback.
    """
    from evalledger.stages.judge.roles import ParseReply

    model = template_model(request.fields)
    try:
        parsed = model.model_validate(reply.values)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'reply'}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"the reply does not fit the template: {problems}") from None
    values = parsed.model_dump(mode="json")
    return ParseReply(values={f.name: values[f.name] for f in request.fields})
