"""The blob split as first written (a walk of every part, encoding each container at every level),
kept as the oracle of ``evalledger.ledger.blobs.split``: the faster split must give the same
stored bytes and the same blobs, in the same order, for any payload."""

from __future__ import annotations

from typing import Any

from evalledger.ledger.blobs import LIT, MIN_CONTAINER, MIN_STRING, REF, _encode, blob_key, has_markers


def reference_split(data: Any, raw: bytes) -> tuple[bytes, dict[str, bytes]]:
    """(stored bytes, blobs) as the first split gave them."""
    if len(raw) < MIN_STRING and not has_markers(raw):
        return raw, {}
    blobs: dict[str, bytes] = {}
    stored = _split_value(data, blobs, top=True)
    if not blobs and stored == data:
        return raw, {}
    return _encode(stored), blobs


def _ref(encoded: bytes, blobs: dict[str, bytes]) -> dict[str, str]:
    key = blob_key(encoded)
    blobs.setdefault(key, encoded)
    return {REF: "sha256:" + key}


def _split_value(value: Any, blobs: dict[str, bytes], top: bool = False) -> Any:
    kind = type(value)
    if kind is str:
        return _ref(_encode(value), blobs) if len(value) >= MIN_STRING else value
    if kind is dict:
        out: Any = {k: _split_value(v, blobs) for k, v in value.items()}
        if len(out) == 1 and (REF in out or LIT in out):
            out = {LIT: out}
    elif kind is list:
        out = [_split_value(v, blobs) for v in value]
    else:
        return value
    if not top and out:
        encoded = _encode(out)
        if len(encoded) >= MIN_CONTAINER:
            return _ref(encoded, blobs)
    return out
