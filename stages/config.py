"""The verification configuration: one typed ``VerificationConfig`` and where its values come from.

Field names and defaults follow the deep-judgment specs (``deep_judgment_*``), plus the judge
backend and model, the VerifyFast audit strategy (``audit``) and the reconstruction claim score
bands (``claim_bands``). Sources, later winning:

1. the defaults below,
2. the benchmark file's ``config`` (carried by ``case.opened``),
3. a ``--config FILE`` (TOML or JSON),
4. ``--set key=value`` (dotted keys reach nested models: ``audit.high_severe_min=4``).

The judge backend and model and the search tools are chosen per run (layers 3-4 and
``--judge/--model``), never by a dropped benchmark file: a file in an inbox must not be able to
switch on paid API calls or name code to import.
``config_hash`` is the sha256 of the effective config's canonical JSON; every stage output
event carries it in ``meta``.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Any, Literal, Mapping

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from evalledger.stages.formats.decode import decode_text, loads
from evalledger.stages.formats.errors import FileRejected
from evalledger.stages.judge.settings import (
    BreakerFailures,
    ReplyBytes,
    RetryAfterSeconds,
    Temperature,
    TimeoutSeconds,
    TokenLimit,
)

# Chosen per run, never by a dropped benchmark file: the judge (paid API calls) and the search
# tools (tavily is paid; "module:function" imports and runs code).
RUN_ONLY_KEYS = ("judge_backend", "judge_model", "judge_response_format", "judge_options",
                 "deep_judgment_search_tool", "deep_judgment_rubric_search_tool", "prices")

# Upper bounds (docs/stages.md lists them): every judge call a case makes is recorded, so a
# number a file may set must not multiply the calls or the events without limit. The per-trait
# settings of a benchmark file (stages.formats.native) use the same bounds.
MAX_EXCERPTS = 100
MAX_RETRY_ATTEMPTS = 20
MAX_AUDIT_COUNT = 100
MAX_REPEATS = 20   # judge_repeats: every repeat is a full set of judge calls for the case


class StrictModel(BaseModel):
    """Frozen, and unknown keys are errors (a typo in a config must not pass silently)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class DeepJudgmentTraitConfig(StrictModel):
    """One trait's deep-judgment settings in ``custom`` mode (spec: DeepJudgmentTraitConfig)."""

    enabled: bool = True
    excerpt_enabled: bool = True
    max_excerpts: int | None = Field(default=None, ge=1, le=MAX_EXCERPTS)
    fuzzy_match_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    excerpt_retry_attempts: int | None = Field(default=None, ge=0, le=MAX_RETRY_ATTEMPTS)
    search_enabled: bool = False


class RubricDeepJudgmentConfig(StrictModel):
    """``deep_judgment_rubric_config``: ``global`` per trait, ``question_specific`` per question and trait."""

    global_: dict[str, DeepJudgmentTraitConfig] = Field(default_factory=dict, alias="global")
    question_specific: dict[str, dict[str, DeepJudgmentTraitConfig]] = Field(default_factory=dict)


class AuditStrategy(StrictModel):
    """VerifyFast's deterministic scoring parameters (spec defaults; strategy.yaml's ``params``).

    credit score: high >= ``high_severe_min`` -> 1; high >= 1 -> 2; low >= ``low_boundary_min``
    (no high) -> 3; low >= 1 -> 4; no errors -> 5. Zone: score <= ``zone_bad_max`` BAD,
    <= ``zone_mid_max`` MID, else GOOD.
    """

    max_facts: int = Field(default=5, ge=1, le=MAX_AUDIT_COUNT)
    numeric_deviation_threshold: float = Field(default=0.10, ge=0.0, le=10.0)
    max_errors_per_phase: int = Field(default=3, ge=1, le=MAX_AUDIT_COUNT)
    high_severe_min: int = Field(default=3, ge=1, le=MAX_AUDIT_COUNT)
    low_boundary_min: int = Field(default=2, ge=1, le=MAX_AUDIT_COUNT)
    zone_bad_max: int = Field(default=2, ge=1, le=5)
    zone_mid_max: int = Field(default=3, ge=1, le=5)

    @model_validator(mode="after")
    def _zones_ordered(self) -> "AuditStrategy":
        if self.zone_mid_max < self.zone_bad_max:
            raise ValueError("zone_mid_max must be >= zone_bad_max")
        return self


class ClaimScoreBands(StrictModel):
    """Reconstruction bands (spec): fully >= ``fully_min``, partially >= ``partially_min``, else not."""

    fully_min: int = Field(default=8, ge=0, le=10)
    partially_min: int = Field(default=4, ge=0, le=10)

    @model_validator(mode="after")
    def _bands_ordered(self) -> "ClaimScoreBands":
        if self.partially_min > self.fully_min:
            raise ValueError("partially_min must be <= fully_min")
        return self


class JudgeOptions(StrictModel):
    """``judge_options``: the judge server's provider settings; unset (null) keeps JudgeSettings' default.

    ``temperature = "omit"`` sends none (reasoning models refuse one; TOML has no null).
    Bounds and meanings: docs/judge.md.
    """

    temperature: Temperature | Literal["omit"] | None = None
    max_tokens: TokenLimit | None = None
    max_completion_tokens: TokenLimit | None = None
    timeout_s: TimeoutSeconds | None = None
    max_reply_bytes: ReplyBytes | None = None
    breaker_failures: BreakerFailures | None = None
    retry_after_max_s: RetryAfterSeconds | None = None

    def settings_keys(self) -> dict[str, Any]:
        """The JudgeSettings keys these options set ("omit" becomes a temperature of None)."""
        keys = {k: v for k, v in self.model_dump().items() if v is not None}
        if keys.get("temperature") == "omit":
            keys["temperature"] = None
        return keys


class ModelPrice(StrictModel):
    """One entry of the price table: USD per million input and output tokens of a model."""

    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)


class VerificationConfig(StrictModel):
    """Every setting a stage reads. Names and defaults of the deep-judgment specs."""

    # Template deep judgment (deep-judgment-templates.md)
    deep_judgment_enabled: bool = False
    deep_judgment_max_excerpts_per_attribute: int = Field(default=3, ge=1, le=MAX_EXCERPTS)
    deep_judgment_fuzzy_match_threshold: float = Field(default=0.80, ge=0.0, le=1.0)
    deep_judgment_excerpt_retry_attempts: int = Field(default=2, ge=0, le=MAX_RETRY_ATTEMPTS)
    deep_judgment_search_enabled: bool = False
    # DESIGN.md: the embedded default search port is the local FTS5 index, not Tavily.
    # "local", "tavily" or a callable as "module:function" (the spec's custom search tool).
    deep_judgment_search_tool: str = "local"

    # Abstention detection: a detect_abstention call per template case; an abstaining response
    # fails as "abstained", and that takes priority over the deep-judgment auto-fail.
    abstention_enabled: bool = False

    # Rubric deep judgment (deep-judgment-rubrics.md)
    deep_judgment_rubric_mode: Literal["disabled", "enable_all", "use_checkpoint", "custom"] = "disabled"
    deep_judgment_rubric_global_excerpts: bool = True
    deep_judgment_rubric_max_excerpts_default: int = Field(default=7, ge=1, le=MAX_EXCERPTS)
    deep_judgment_rubric_fuzzy_match_threshold_default: float = Field(default=0.80, ge=0.0, le=1.0)
    deep_judgment_rubric_excerpt_retry_attempts_default: int = Field(default=2, ge=0, le=MAX_RETRY_ATTEMPTS)
    deep_judgment_rubric_search_enabled: bool = False
    deep_judgment_rubric_search_tool: str = "local"
    deep_judgment_rubric_config: RubricDeepJudgmentConfig | None = None

    # The embedder SemanticMatch fields compare with: "offline" (character n-grams, the default) or
    # "minilm" (all-MiniLM-L6-v2, needs the `embeddings` extra). It decides verdicts, so it is config.
    semantic_embedder: Literal["offline", "minilm"] = "offline"

    # Judge (run-level only, see RUN_ONLY_KEYS)
    judge_backend: Literal["offline", "openai", "replay"] = "offline"
    judge_model: str | None = None
    # How the openai judge sends the reply schema: json_schema (strict), json_object (with the
    # schema, llama-cpp-python's server) or prompt (docs/judge.md, "Response formats").
    judge_response_format: Literal["json_schema", "json_object", "prompt"] = "json_schema"
    judge_options: JudgeOptions = Field(default_factory=JudgeOptions)

    # Reconstruction and audit
    claim_bands: ClaimScoreBands = Field(default_factory=ClaimScoreBands)
    audit: AuditStrategy = Field(default_factory=AuditStrategy)

    # Repeated judging (stages.repeats): each case judged K times, repeat r sent with seed r (and
    # ``repeat_temperature`` when set); the case verdict follows ``repeat_rule``, a majority tie
    # goes to ``repeat_tie``. At K = 1 nothing changes: no seed is sent and no repeat event written.
    judge_repeats: int = Field(default=1, ge=1, le=MAX_REPEATS)
    repeat_rule: Literal["majority", "all"] = "majority"
    repeat_tie: Literal["pass", "fail"] = "fail"
    repeat_temperature: Temperature | None = None

    # The price table (run-level only): provider model name -> USD per million tokens. A model
    # missing from it is unpriced, and reports say its cost is unknown.
    prices: dict[str, ModelPrice] = Field(default_factory=dict)

    @field_validator("deep_judgment_search_tool", "deep_judgment_rubric_search_tool")
    @classmethod
    def _search_tool(cls, value: str) -> str:
        if value in ("local", "tavily") or (":" in value and all(value.split(":", 1))):
            return value
        raise ValueError("a search tool is 'local', 'tavily' or a callable as 'module:function'")

    @field_validator("deep_judgment_rubric_config", mode="before")
    @classmethod
    def _empty_rubric_config(cls, value: Any) -> Any:
        return None if value == {} else value

    def to_json(self) -> dict[str, Any]:
        """The effective config as JSON (spec key names, ``global`` not ``global_``).

        An empty price table, and each repeat key at its default, are left out, so configs (and
        their hashes) from before they existed are unchanged.
        """
        data = self.model_dump(mode="json", by_alias=True)
        if not data["prices"]:
            del data["prices"]
        for key, default in REPEAT_DEFAULTS.items():
            if data[key] == default:
                del data[key]
        return data

    def hash(self) -> str:
        """sha256 of the canonical JSON of the effective config (stamped into every output's meta)."""
        return hashlib.sha256(orjson.dumps(self.to_json(), option=orjson.OPT_SORT_KEYS)).hexdigest()


# The repeat keys and their defaults: left out of a config's JSON (and hash) while at them.
REPEAT_DEFAULTS = {name: VerificationConfig.model_fields[name].default
                   for name in ("judge_repeats", "repeat_rule", "repeat_tie", "repeat_temperature")}

UNKNOWN_KEY = "unknown key (not a VerificationConfig field; docs/stages.md lists them)"


class ConfigError(ValueError):
    """A configuration that cannot be used; ``errors`` lists ``{where, reason}``."""

    def __init__(self, errors: list[dict[str, str]]):
        self.errors = errors
        super().__init__("; ".join(f"{e['where']}: {e['reason']}" for e in errors))


def known_keys(loc: tuple) -> list[str]:
    """The keys allowed beside the last element of ``loc`` (a pydantic error location)."""
    model: Any = VerificationConfig
    for part in loc[:-1]:
        field = model.model_fields.get(part) if hasattr(model, "model_fields") else None
        annotation = getattr(field, "annotation", None)
        inner = [a for a in getattr(annotation, "__args__", ()) if hasattr(a, "model_fields")]
        model = annotation if hasattr(annotation, "model_fields") else (inner[0] if inner else None)
        if model is None:
            return []
    return [f.alias or name for name, f in model.model_fields.items()]


def _unknown_key(loc: tuple) -> str:
    """The unknown-key reason, with the closest known key when there is one."""
    close = difflib.get_close_matches(str(loc[-1]), known_keys(loc), n=1, cutoff=0.6) if loc else []
    return UNKNOWN_KEY + (f"; did you mean {close[0]!r}?" if close else "")


def _validation_errors(exc: ValidationError, where: str, sep: str = ".") -> list[dict[str, str]]:
    """Pydantic errors as ``{where, reason}`` with the dotted key path after ``where`` and ``sep``."""
    out = []
    for err in exc.errors():
        path = ".".join(str(p) for p in err["loc"] if p != "global_")
        # pydantic's "Extra inputs are not permitted" does not tell a user it means a misspelt key
        reason = _unknown_key(err["loc"]) if err["type"] == "extra_forbidden" else err["msg"]
        out.append({"where": f"{where}{sep}{path}" if path else where, "reason": reason})
    return out


def benchmark_config_errors(data: Any, where: str = "config") -> list[dict[str, str]]:
    """Why a benchmark file's ``config`` is not valid (empty list when it is).

    The intake validates with this before registering a benchmark, so a bad key rejects the
    file with a message naming it instead of failing a run later.
    """
    if data is None:
        return []
    if not isinstance(data, Mapping):
        return [{"where": where, "reason": "config must be an object of VerificationConfig keys"}]
    errors = [{"where": f"{where}.{key}", "reason": "the judge and the search tools are chosen per run "
               "(--judge/--model, --config or --set), not by a benchmark file"}
              for key in RUN_ONLY_KEYS if key in data]
    try:
        VerificationConfig.model_validate(dict(data))
    except ValidationError as exc:
        errors += _validation_errors(exc, where)
    return errors


def merge_layers(*layers: Mapping[str, Any] | None) -> dict[str, Any]:
    """Merge config dicts, later winning; nested dicts (audit, claim_bands) merge key by key."""
    merged: dict[str, Any] = {}
    for layer in layers:
        for key, value in (layer or {}).items():
            if isinstance(value, Mapping) and isinstance(merged.get(key), dict) \
                    and key != "deep_judgment_rubric_config":
                merged[key] = merge_layers(merged[key], value)
            else:
                merged[key] = value
    return merged


def effective_config(benchmark: Mapping[str, Any] | None = None,
                     run_layer: Mapping[str, Any] | None = None, where: str = "config",
                     sep: str = ".") -> VerificationConfig:
    """Defaults <- the benchmark's config (minus run-only keys) <- the run's layer (file + --set).

    ``where`` and ``sep`` go before the key path of a bad key in the ConfigError.
    """
    bench = {k: v for k, v in (benchmark or {}).items() if k not in RUN_ONLY_KEYS}
    try:
        return VerificationConfig.model_validate(merge_layers(bench, run_layer))
    except ValidationError as exc:
        raise ConfigError(_validation_errors(exc, where, sep)) from None


MAX_CONFIG_BYTES = 1 << 20  # a config is a few hundred bytes; more is a mistake (or /dev/zero)


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a ``--config`` file: TOML (``.toml``) or JSON (anything else), a table of config keys.

    Only a regular file of at most ``MAX_CONFIG_BYTES`` is read (``/dev/zero`` or a FIFO would be
    read forever). JSON goes through the benchmark files' decoder, so a repeated key (or NaN, or
    an integer beyond 64 bits) is refused with its path; TOML refuses repeated keys itself.
    """
    path = Path(path)
    raw = _read_config_bytes(path)
    if path.suffix == ".toml":
        try:
            data = tomllib.loads(raw.decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError([{"where": str(path), "reason": f"not valid TOML: {exc}"}]) from None
    else:
        # the benchmark files' decoder: duplicate keys, NaN and oversized numbers are named with their path
        try:
            data = loads(decode_text(raw))
        except FileRejected as exc:
            raise ConfigError([{"where": f"{path}: {p.where}", "reason": p.reason} for p in exc.problems]) from None
    if not isinstance(data, dict):
        raise ConfigError([{"where": str(path), "reason": "a config file holds a table/object of keys"}])
    return data


def _read_config_bytes(path: Path) -> bytes:
    """The bytes of a regular config file of at most MAX_CONFIG_BYTES; ConfigError otherwise."""
    try:
        # O_NONBLOCK: opening a FIFO for reading must not wait for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise ConfigError([{"where": str(path), "reason": f"cannot read: {exc.strerror}"}]) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ConfigError([{"where": str(path), "reason": "not a regular file (a device, FIFO or folder "
                            "cannot be a config file)"}])
    with os.fdopen(fd, "rb") as handle:
        text = handle.read(MAX_CONFIG_BYTES + 1)
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError([{"where": str(path), "reason": f"larger than {MAX_CONFIG_BYTES} bytes; "
                            "a config file lists a few keys"}])
    return text


def parse_set(items: list[str] | None) -> dict[str, Any]:
    """``--set key=value`` pairs as a nested dict. Values are JSON when they parse, else text.

    ``--set deep_judgment_enabled=true --set audit.high_severe_min=4 --set deep_judgment_rubric_mode=custom``
    """
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError([{"where": f"--set {item}", "reason": "expected key=value"}])
        value = _set_value(raw, item)
        target = out
        *parents, leaf = key.split(".")
        for part in parents:
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                raise ConfigError([{"where": f"--set {item}", "reason": f"{part} is not a table"}])
        target[leaf] = value
    return out


def _set_value(raw: str, item: str) -> Any:
    """The value of one ``--set``: JSON when it parses (refused when it repeats a key or holds NaN,
    as a config file would be), else the text itself."""
    try:
        json.loads(raw)
    except ValueError:
        return raw
    try:
        return loads(raw)
    except FileRejected as exc:
        raise ConfigError([{"where": f"--set {item}", "reason": f"{p.where}: {p.reason}"}
                           for p in exc.problems]) from None


def run_layer(config_file: str | Path | None = None, sets: list[str] | None = None) -> dict[str, Any]:
    """The run's own layer: the ``--config`` file then ``--set``, validated as a whole.

    A bad key is named with where it came from: the file's name when the file alone is
    invalid, else ``--set`` (a ``--set`` may correct a value from the file).
    """
    from_file = load_config_file(config_file) if config_file else {}
    layer = merge_layers(from_file, parse_set(sets))
    try:
        effective_config(None, layer)  # fail early, naming the bad key
    except ConfigError:
        effective_config(None, from_file, where=f"{config_file}:", sep=" ")
        effective_config(None, layer, where="--set", sep=" ")
    return layer
