"""Helpers for the profile, answering and budget tests: scripted judges on real stand-in servers,
and models files that point named models at them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalledger import ledger
from evalledger.testing.stand_in import StandIn
from stages_scripted import audit_reply, role_of, template_judge

ALPHA_KEY = "sk-alpha-test-key-0123456789abcdef"
BETA_KEY = "sk-beta-test-key-fedcba9876543210"
KEYS_ENV = {"ALPHA_KEY": ALPHA_KEY, "BETA_KEY": BETA_KEY}
ANSWER = "A normal human somatic cell has 23 pairs of chromosomes [1]."


@dataclass
class KeyedStandIn(StandIn):
    """The stand-in, also noting the Authorization header each request carried."""

    authorizations: list[str | None] = field(default_factory=list)

    async def _answer(self, request):
        self.authorizations.append(request.headers.get("Authorization"))
        return await super()._answer(request)


def scripted_judge(answer: str = ANSWER, pairs_offset: int = 0):
    """A reply_fn for answer, template and audit requests; ``pairs_offset`` makes a judge misread the count."""
    template = template_judge()

    def reply(body: dict[str, Any]) -> Any:
        role = role_of(body)
        if role == "answer":
            return {"answer": answer}
        if role in ("decompose", "check_facts", "check_logic"):
            return audit_reply(body, role)
        out = template(body, role)
        if role == "parse" and out.get("pair_count") is not None:
            out = {"pair_count": out["pair_count"] + pairs_offset}
        return out

    return reply


def models_toml(alpha_url: str, beta_url: str | None = None, *, cross_audit: str = "") -> str:
    """A models file: alpha and beta named models, profiles ``full`` (alpha judges) and ``cross`` (beta judges)."""
    beta_url = beta_url or alpha_url
    return f"""
[defaults]
max_attempts = 2
backoff_base_s = 0.01

[models.alpha]
base_url = "{alpha_url}"
model = "alpha-1"
api_key_env = "ALPHA_KEY"

[models.beta]
base_url = "{beta_url}"
model = "beta-1"
api_key_env = "BETA_KEY"
parameters = {{temperature = 0.2}}

[profiles.full]
run = "alpha"
verify = "alpha"

[profiles.cross]
run = "alpha"
verify = "beta"
{cross_audit}
"""


def write(path: Path, content: Any) -> Path:
    """Write JSON, JSONL (a list of rows, for .jsonl) or text."""
    if isinstance(content, str):
        path.write_text(content)
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in content))
    else:
        path.write_text(json.dumps(content))
    return path


def read(home: Path, *types: str) -> list[ledger.Event]:
    """The events of ``types`` (all when none) in the home's ledger."""
    with ledger.open_ledger(home, readonly=True) as led:
        return list(led.read(types=list(types) or None))


def every_file_bytes(root: Path) -> dict[Path, bytes]:
    """Every regular file under ``root`` with its bytes."""
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
