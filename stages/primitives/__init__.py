"""The 18 deterministic verification primitives, their normalizers, and `from_spec`.

Parsed primitives: `check(extracted, expected) -> bool` (plus `explain` for the reason).
Trace primitives: `check_trace(raw_response) -> bool`; a trace field passes when that equals
`bool(ground_truth)`. Every primitive round-trips through its JSON spec:
`from_spec(p.to_spec()) == p`. See docs/primitives.md.
"""

from evalledger.stages.primitives.base import (
    CheckError,
    ParsedPrimitive,
    Primitive,
    PrimitiveSpecError,
    TracePrimitive,
)
from evalledger.stages.primitives.dates import DateMatch, DateRange, DateTolerance
from evalledger.stages.primitives.lists import OrderedMatch, SetContainment
from evalledger.stages.primitives.normalizers import NORMALIZER_NAMES, Normalizer, SynonymMap
from evalledger.stages.primitives.numeric import NumericExact, NumericRange, NumericTolerance
from evalledger.stages.primitives.registry import KNOWN_TYPES, REGISTRY, from_spec, is_trace
from evalledger.stages.primitives.text import (
    BooleanMatch,
    ContainsAll,
    ContainsAny,
    ExactMatch,
    LiteralMatch,
    RegexMatch,
    SemanticMatch,
)
from evalledger.stages.primitives.trace import TraceContains, TraceLength, TraceRegex

__all__ = [
    "KNOWN_TYPES", "NORMALIZER_NAMES", "REGISTRY",
    "BooleanMatch", "CheckError", "ContainsAll", "ContainsAny", "DateMatch", "DateRange",
    "DateTolerance", "ExactMatch", "LiteralMatch", "Normalizer", "NumericExact",
    "NumericRange", "NumericTolerance", "OrderedMatch", "ParsedPrimitive", "Primitive",
    "PrimitiveSpecError", "RegexMatch", "SemanticMatch", "SetContainment", "SynonymMap",
    "TraceContains", "TraceLength", "TracePrimitive", "TraceRegex", "from_spec", "is_trace",
]
