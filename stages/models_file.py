"""The models file: named models and the profiles that pair them (VerifyFast's ``settings.yaml``, in TOML).

```toml
[defaults]                       # parameters every model starts from (optional)
temperature = 0.1

[models.kimi-k2]
base_url = "http://127.0.0.1:8001/v1"
model = "Kimi-K2-Instruct-0905"
api_key_env = "KIMI_API_KEY"     # the NAME of the variable that holds the key, never the key
parameters = {max_tokens = 4000}

answering = ["kimi-k2"]          # answering models of runs without a profile (optional)

[profiles.cross-verify]
run = "kimi-k2"                  # the answering model (optional)
verify = "qwen3-235b"            # the judge
audit = {max_errors_per_phase = 5}   # overrides of the audit strategy for this profile's cases
```

Read from ``--models FILE`` or ``<home>/models.toml``. Keys are only ever read from the
environment: a key written into the file is refused, so the file can be shared and recorded.
Every problem is a ``ConfigError`` naming the file, the place and the reason.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evalledger.stages.config import AuditStrategy, ConfigError

DEFAULT_NAME = "models.toml"
# JudgeSettings keys a named model may set under ``parameters`` (the rest say which model it is,
# or belong to the run: caching, replay, prices).
PARAMETER_KEYS = ("temperature", "max_tokens", "concurrency", "max_attempts", "max_invalid_replies",
                  "timeout_s", "backoff_base_s", "backoff_max_s", "retry_after_max_s", "response_format")
MODEL_KEYS = ("base_url", "model", "api_key_env", "parameters")
PROFILE_KEYS = ("run", "verify", "audit")
SECRET_WORDS = ("key", "token", "secret", "password", "apikey")


def _looks_secret(key: str) -> bool:
    """A key name that would hold a credential (``api_key``, ``token``, ``auth_secret``...)."""
    words = key.lower().replace("-", "_").split("_")
    return key != "api_key_env" and any(word in SECRET_WORDS for word in words)


@dataclass(frozen=True)
class NamedModel:
    """A model of the models file: where it is served, its provider name, its key's variable, parameters."""

    name: str
    model: str
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    parameters: dict[str, Any] = field(default_factory=dict)

    def identity(self) -> dict[str, Any]:
        """What is recorded about it in events: name, provider model, base URL and the sampling
        parameters that go into its request hashes (so a replay can find its answers); never a key."""
        from evalledger.stages.judge.settings import JudgeSettings
        sampling = JudgeSettings(**self.parameters).parameters()
        return {"name": self.name, "model": self.model, "base_url": self.base_url, "parameters": sampling}


@dataclass(frozen=True)
class Profile:
    """A profile: ``run`` answers questions without responses (optional), ``verify`` judges."""

    name: str
    verify: NamedModel
    run: NamedModel | None = None
    audit: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelsFile:
    """A parsed models file."""

    path: str
    models: dict[str, NamedModel]
    profiles: dict[str, Profile]
    answering: list[NamedModel] = field(default_factory=list)   # answer questions in runs without a profile

    def select(self, names: list[str]) -> list[Profile]:
        """The profiles named, in order; a ConfigError naming the unknown ones and the known ones."""
        unknown = [n for n in names if n not in self.profiles]
        if unknown:
            known = ", ".join(sorted(self.profiles)) or "none"
            raise ConfigError([{"where": self.path, "reason": f"no profile {', '.join(map(repr, unknown))} "
                                                              f"(profiles defined: {known})"}])
        return [self.profiles[n] for n in dict.fromkeys(names)]


def default_models_path(home: str | Path | None) -> Path | None:
    """``<home>/models.toml`` when it exists."""
    if home is None:
        return None
    path = Path(home) / DEFAULT_NAME
    return path if path.is_file() else None


def load_models_file(path: str | Path) -> ModelsFile:
    """Read and check a models file; a ConfigError listing every problem with its place."""
    path = Path(path)
    label = str(path)
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except OSError as exc:
        raise ConfigError([{"where": label, "reason": f"cannot read the models file: {exc.strerror}"}]) from None
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ConfigError([{"where": f"{label}: line {line}",
                            "reason": f"not UTF-8 text (byte offset {exc.start})"}]) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([{"where": label, "reason": f"not valid TOML: {exc}"}]) from None
    return parse_models(data, label)


def parse_models(data: dict[str, Any], label: str = "models file") -> ModelsFile:
    """Check the models file's tables (``defaults``, ``models``, ``profiles``) and build it."""
    errors: list[dict[str, str]] = []
    error = _Collector(label, errors)

    for key in sorted(set(data) - {"defaults", "models", "profiles", "answering"}):
        error(key, "unknown table (a models file has defaults, models, profiles and answering)")
    defaults = _table(data, "defaults", error)
    _check_parameters(defaults, "defaults", error)
    models: dict[str, NamedModel] = {}
    for name, spec in _table(data, "models", error).items():
        model = _named_model(name, spec, defaults, error)
        if model is not None:
            models[name] = model
    broken = set(_table(data, "models", lambda *a: None)) - set(models)
    profiles: dict[str, Profile] = {}
    for name, spec in _table(data, "profiles", error).items():
        profile = _profile(name, spec, models, broken, error)
        if profile is not None:
            profiles[name] = profile
    answering = _answering(data.get("answering", []), models, broken, error)
    if not models and not errors:
        error("models", "no models defined (add a [models.NAME] table)")
    if errors:
        raise ConfigError(errors)
    return ModelsFile(label, models, profiles, answering)


def _answering(names: Any, models: dict[str, NamedModel], broken: set[str], error) -> list[NamedModel]:
    """The top-level ``answering`` list: names of models that answer questions outside profiles."""
    if not isinstance(names, list):
        error("answering", f"must be a list of model names, not {_kind(names)}")
        return []
    out = []
    for i, name in enumerate(names):
        if isinstance(name, str) and name in broken:
            error(f"answering[{i}]", f"model {name!r} cannot be used: its own errors are listed above")
        elif not isinstance(name, str) or name not in models:
            error(f"answering[{i}]", f"no model named {name!r} (models defined: {', '.join(sorted(models)) or 'none'})")
        elif models[name] not in out:
            out.append(models[name])
    return out


class _Collector:
    """Collects ``{where, reason}`` problems, each place prefixed with the file's name."""

    def __init__(self, label: str, errors: list[dict[str, str]]):
        self.label, self.errors = label, errors

    def __call__(self, where: str, reason: str) -> None:
        self.errors.append({"where": f"{self.label}: {where}", "reason": reason})

    def __len__(self) -> int:
        return len(self.errors)


def _table(data: dict[str, Any], key: str, error) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        error(key, f"must be a table, not {_kind(value)}")
        return {}
    return value


def _kind(value: Any) -> str:
    return {str: "text", int: "a number", float: "a number", bool: "true/false", list: "a list",
            dict: "a table"}.get(type(value), type(value).__name__)


def _secret_keys(spec: dict[str, Any], where: str, error) -> None:
    """Refuse anything that looks like a key written into the file (keys live in the environment)."""
    for key in spec:
        if _looks_secret(key):
            error(f"{where}.{key}", "keys are never written in the models file: put the key in an "
                                    "environment variable and name that variable with api_key_env")


def _check_parameters(params: dict[str, Any], where: str, error) -> None:
    from evalledger.stages.judge.settings import JudgeSettings
    _secret_keys(params, where, error)
    for key in sorted(set(params) - set(PARAMETER_KEYS)):
        if not _looks_secret(key):
            error(f"{where}.{key}", f"unknown parameter (parameters: {', '.join(PARAMETER_KEYS)})")
    known = {k: v for k, v in params.items() if k in PARAMETER_KEYS}
    try:
        JudgeSettings(**known)
    except ValidationError as exc:
        for item in exc.errors():
            place = ".".join(str(p) for p in item["loc"])
            error(f"{where}.{place}", item["msg"])


def _named_model(name: str, spec: Any, defaults: dict[str, Any], error) -> NamedModel | None:
    where = f"models.{name}"
    if not isinstance(spec, dict):
        error(where, f"must be a table, not {_kind(spec)}")
        return None
    before = len(error)
    _secret_keys(spec, where, error)
    for key in sorted(set(spec) - set(MODEL_KEYS)):
        if not _looks_secret(key):
            error(f"{where}.{key}", f"unknown key (a model has {', '.join(MODEL_KEYS)})")
    for key in ("model", "base_url", "api_key_env"):
        if key in spec and (not isinstance(spec[key], str) or not spec[key].strip()):
            error(f"{where}.{key}", "must be non-empty text")
    if "model" not in spec:
        error(f"{where}.model", "missing: the model's name at its provider")
    base_url = spec.get("base_url")
    if isinstance(base_url, str) and not base_url.startswith(("http://", "https://")):
        error(f"{where}.base_url", f"not an http(s) URL: {base_url!r}")
    env = spec.get("api_key_env", "OPENAI_API_KEY")
    if isinstance(env, str) and (env.startswith("sk-") or not env.replace("_", "").isalnum()):
        error(f"{where}.api_key_env", "must be the NAME of an environment variable (letters, digits, _), "
                                      "not a key")
    params = spec.get("parameters", {})
    if not isinstance(params, dict):
        error(f"{where}.parameters", f"must be a table, not {_kind(params)}")
        params = {}
    _check_parameters(params, f"{where}.parameters", error)
    if len(error) != before:
        return None
    merged = {k: v for k, v in {**defaults, **params}.items() if k in PARAMETER_KEYS}
    return NamedModel(name, spec["model"], base_url, env, merged)


def _profile(name: str, spec: Any, models: dict[str, NamedModel], broken: set[str], error) -> Profile | None:
    where = f"profiles.{name}"
    if not isinstance(spec, dict):
        error(where, f"must be a table, not {_kind(spec)}")
        return None
    before = len(error)
    for key in sorted(set(spec) - set(PROFILE_KEYS)):
        error(f"{where}.{key}", f"unknown key (a profile has {', '.join(PROFILE_KEYS)})")
    if "verify" not in spec:
        error(f"{where}.verify", "missing: the named model that judges")
    picked: dict[str, NamedModel | None] = {"run": None, "verify": None}
    for role in ("run", "verify"):
        ref = spec.get(role)
        if ref is None:
            continue
        if isinstance(ref, str) and ref in broken:
            error(f"{where}.{role}", f"model {ref!r} cannot be used: its own errors are listed above")
        elif not isinstance(ref, str) or ref not in models:
            known = ", ".join(sorted(models)) or "none"
            error(f"{where}.{role}", f"no model named {ref!r} (models defined: {known})")
        else:
            picked[role] = models[ref]
    audit = spec.get("audit", {})
    if not isinstance(audit, dict):
        error(f"{where}.audit", f"must be a table, not {_kind(audit)}")
        audit = {}
    try:
        AuditStrategy.model_validate(audit)
    except ValidationError as exc:
        for item in exc.errors():
            place = ".".join(str(p) for p in item["loc"])
            reason = "unknown audit parameter" if item["type"] == "extra_forbidden" else item["msg"]
            error(f"{where}.audit" + (f".{place}" if place else ""), reason)
    if len(error) != before:
        return None
    return Profile(name, picked["verify"], picked["run"], dict(audit))
