"""A checker for OpenAI's strict structured-outputs subset of JSON Schema.

``strict_mode_problems(schema)`` lists every way a schema breaks the rules OpenAI documents for
``response_format: {type: json_schema, strict: true}`` (an empty list means it is accepted):

- the root is an object, not an ``anyOf``;
- every object has ``additionalProperties: false`` and lists every property in ``required``;
- only the supported keywords appear: ``type`` (string, number, integer, boolean, object, array,
  null, or a list of them), ``properties``, ``required``, ``additionalProperties``, ``items``,
  ``enum``, ``const``, ``anyOf``, ``$ref``, ``$defs``, ``description``; for strings ``pattern``
  and ``format`` (a supported format); for numbers ``minimum``, ``maximum``,
  ``exclusiveMinimum``, ``exclusiveMaximum``, ``multipleOf``; for arrays ``minItems`` and
  ``maxItems``;
- at most 10 levels of object nesting and 5,000 object properties in all;
- at most 1,000 enum values in all, and a string enum of more than 250 values at most 15,000
  characters long;
- the names, definition names, enum and const values at most 120,000 characters in all.

Besides OpenAI's rules it refuses what evalledger's schemas promise never to emit: ``default``
and ``title``.
"""

from __future__ import annotations

from typing import Any

TYPES = {"string", "number", "integer", "boolean", "object", "array", "null"}
FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
COMMON = {"type", "enum", "const", "anyOf", "$ref", "description", "$defs"}
BY_TYPE = {
    "object": {"properties", "required", "additionalProperties"},
    "array": {"items", "minItems", "maxItems"},
    "string": {"pattern", "format"},
    "number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
    "integer": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
    "boolean": set(),
    "null": set(),
}
MAX_DEPTH = 10
MAX_PROPERTIES = 5000
MAX_ENUM_VALUES = 1000
LARGE_ENUM = 250
LARGE_ENUM_CHARS = 15000
MAX_CHARS = 120000


def strict_mode_problems(schema: dict[str, Any]) -> list[str]:
    """Every way ``schema`` breaks OpenAI's strict-mode rules, each naming where (empty: accepted)."""
    problems: list[str] = []
    if not isinstance(schema, dict) or schema.get("type") != "object" or "anyOf" in schema:
        problems.append("$: the root must be an object schema (type object, not anyOf)")
    totals = {"properties": 0, "enum_values": 0, "chars": 0, "depth": 0}
    for name in schema.get("$defs", {}) if isinstance(schema, dict) else ():
        totals["chars"] += len(name)
    _walk(schema, "$", 1, totals, problems)
    if totals["depth"] > MAX_DEPTH:
        problems.append(f"$: {totals['depth']} levels of object nesting, more than {MAX_DEPTH}")
    if totals["properties"] > MAX_PROPERTIES:
        problems.append(f"$: {totals['properties']} object properties, more than {MAX_PROPERTIES}")
    if totals["enum_values"] > MAX_ENUM_VALUES:
        problems.append(f"$: {totals['enum_values']} enum values, more than {MAX_ENUM_VALUES}")
    if totals["chars"] > MAX_CHARS:
        problems.append(f"$: {totals['chars']} characters of names and enum values, more than {MAX_CHARS}")
    return problems


def _types(schema: dict[str, Any]) -> list[str]:
    kind = schema.get("type")
    return [] if kind is None else [kind] if isinstance(kind, str) else list(kind)


def _walk(schema: Any, where: str, depth: int, totals: dict[str, int], problems: list[str]) -> None:
    """Check one subschema and recurse into its children."""
    if not isinstance(schema, dict):
        problems.append(f"{where}: a schema must be an object, not {type(schema).__name__}")
        return
    types = _types(schema)
    for kind in types:
        if kind not in TYPES:
            problems.append(f"{where}: unsupported type {kind!r}")
    allowed = COMMON.union(*(BY_TYPE.get(k, set()) for k in types))
    for key in schema:
        if key not in allowed:
            problems.append(f"{where}: keyword {key!r} is not supported here" if key not in ("default", "title")
                            else f"{where}: {key!r} must not be emitted")
    if schema.get("format") is not None and schema["format"] not in FORMATS:
        problems.append(f"{where}: format {schema['format']!r} is not supported")
    if not types and not ({"anyOf", "$ref", "enum", "const"} & set(schema)):
        problems.append(f"{where}: no type")
    _check_enum(schema, where, totals, problems)
    if "object" in types:
        _check_object(schema, where, depth, totals, problems)
    if "array" in types:
        if "items" not in schema:
            problems.append(f"{where}: an array needs items")
        else:
            _walk(schema["items"], f"{where}[]", depth, totals, problems)
    for i, option in enumerate(schema.get("anyOf", [])):
        _walk(option, f"{where}.anyOf[{i}]", depth, totals, problems)
    for name, definition in schema.get("$defs", {}).items():
        _walk(definition, f"$defs.{name}", 1, totals, problems)


def _check_enum(schema: dict[str, Any], where: str, totals: dict[str, int], problems: list[str]) -> None:
    if "const" in schema:
        totals["chars"] += len(str(schema["const"]))
    if "enum" not in schema:
        return
    values = schema["enum"]
    if not isinstance(values, list) or not values:
        problems.append(f"{where}: enum must be a non-empty list")
        return
    totals["enum_values"] += len(values)
    strings = [v for v in values if isinstance(v, str)]
    totals["chars"] += sum(len(v) for v in strings)
    if len(values) > LARGE_ENUM and sum(len(v) for v in strings) > LARGE_ENUM_CHARS:
        problems.append(f"{where}: an enum of {len(values)} values longer than {LARGE_ENUM_CHARS} characters")


def _check_object(schema: dict[str, Any], where: str, depth: int, totals: dict[str, int],
                  problems: list[str]) -> None:
    totals["depth"] = max(totals["depth"], depth)
    properties = schema.get("properties", {})
    if schema.get("additionalProperties") is not False:
        problems.append(f"{where}: additionalProperties must be false")
    missing = [name for name in properties if name not in schema.get("required", [])]
    if missing:
        problems.append(f"{where}: every property must be required; not required: {', '.join(missing)}")
    unknown = [name for name in schema.get("required", []) if name not in properties]
    if unknown:
        problems.append(f"{where}: required names unknown properties: {', '.join(unknown)}")
    totals["properties"] += len(properties)
    for name, child in properties.items():
        totals["chars"] += len(name)
        _walk(child, f"{where}.{name}", depth + 1, totals, problems)
