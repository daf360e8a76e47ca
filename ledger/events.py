"""The event catalog of DESIGN.md: names and fixed payload keys are part of the public format.

Each model declares the keys DESIGN.md fixes (and the ones the stages rely on). Domain payloads
accept further keys (``extra="allow"``): "more keys are welcome; these names are fixed".
Operations payloads (notes, overrides, runs) are closed.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict

from evalledger.ledger.catalog import Payload, event_type


class DomainPayload(Payload):
    """A payload whose fixed keys are declared and that may carry more."""

    model_config = ConfigDict(frozen=True, extra="allow", allow_inf_nan=False)


class WhereReason(Payload):
    where: str
    reason: str


# --- Ingestion -----------------------------------------------------------------------------------

@event_type("file.received")
class FileReceived(DomainPayload):
    file: str
    sha256: str
    size: int
    format: str | None = None
    status: str | None = None            # accepted | pending (intake)
    benchmark: str | None = None         # the benchmark id the file registered or answered
    benchmark_name: str | None = None


@event_type("benchmark.registered")
class BenchmarkRegistered(DomainPayload):
    benchmark: str
    name: str
    kind: Literal["template", "reconstruction", "audit"]
    format: str | None = None            # the input format it came from (benchmark, karenina, ...)
    config: dict[str, Any] = {}
    questions: list[dict[str, Any]] = []
    source: dict[str, Any] | None = None  # {"file", "sha256"}
    rejected_questions: list[WhereReason] = []
    rejected_traits: list[WhereReason] = []
    warnings: list[WhereReason] = []       # load-time warnings: valid specs probably not meant
    # A large benchmark's questions come in parts (issue 15): this event then holds the first part
    # and the extra keys question_count and question_parts (not declared, so a one-event
    # registration keeps its bytes); ``benchmark.questions_added`` events in the same batch hold
    # the rest.


@event_type("benchmark.questions_added")
class BenchmarkQuestionsAdded(DomainPayload):
    """Part ``part`` (1, 2, ...) of a large benchmark's questions, appended with its registration."""

    benchmark: str
    part: int
    questions: list[dict[str, Any]]


@event_type("benchmark.rejected")
class BenchmarkRejected(DomainPayload):
    file: str
    errors: list[WhereReason]
    sha256: str | None = None
    size: int | None = None


@event_type("responses.registered")
class ResponsesRegistered(DomainPayload):
    benchmark: str                       # the benchmark id; for pending responses, the name or id they gave
    pending: bool = False
    file: str | None = None
    sha256: str | None = None
    count: int = 0
    cases: list[str] = []
    responses: list[dict[str, Any]] = []  # pending only: the responses held until the benchmark arrives
    resolved_from: str | None = None     # id of the pending event this resolves
    rejected: bool = False
    errors: list[WhereReason] = []
    # Past 10,000 case ids (issue 15) this event holds the first 10,000 and the extra key
    # case_parts (not declared, so a one-event record keeps its bytes); ``responses.cases_added``
    # events in the same batch hold the rest.


@event_type("responses.cases_added")
class ResponsesCasesAdded(DomainPayload):
    """Part ``part`` (1, 2, ...) of the case ids of a file's ``responses.registered``."""

    benchmark: str
    sha256: str
    part: int
    cases: list[str]


@event_type("responses.pending_added")
class ResponsesPendingAdded(DomainPayload):
    """Part ``part`` (1, 2, ...) of the responses a pending ``responses.registered`` holds, past
    its first 10,000 (issue 15): appended in its batch, stream ``file:<sha256>``. Its ``count``
    then says more than its own ``responses``."""

    benchmark: str                       # the name or id the responses gave, as in the pending event
    sha256: str
    part: int
    responses: list[dict[str, Any]]


@event_type("case.opened")
class CaseOpened(DomainPayload):
    case_id: str
    benchmark: str
    kind: Literal["template", "reconstruction", "audit"]
    question_id: str
    model: str | None = None
    benchmark_name: str | None = None
    question: dict[str, Any] | None = None   # internals.md: self-contained question per kind
    response: Any = None                     # text (template, audit) or reconstruction object
    config: dict[str, Any] = {}
    source: dict[str, Any] | None = None     # {"file", "sha256"} of the file that opened it


# --- Judge traffic -------------------------------------------------------------------------------

@event_type("judge.called")
class JudgeCalled(DomainPayload):
    role: str
    backend: str
    model: str | None
    request_hash: str
    attempt: int
    error: str | None = None
    usage: dict[str, Any] | None = None
    latency_ms: float | None = None
    # Declared by the judge and search ports (stages/judge, stages/search; docs/judge.md):
    case_id: str | None = None
    step_attempt: int | None = None        # the stage's own attempt (an excerpt retry); keys the event
    request: dict[str, Any] | None = None  # {"payload", "messages", "parameters"}: all replay needs
    reply: Any = None                      # the validated reply (null on failure)
    raw_reply: str | None = None           # the text the model sent (openai)
    sent: list[dict[str, Any]] | None = None  # messages actually sent, when they differ (feedback, schema in prompt)
    http_status: int | None = None
    cost: float | None = None              # USD, when the model is in the price table
    degraded: bool | None = None           # search: it failed and gave no results
    source_event: str | None = None        # answered from this recorded event (replay, or reuse on another case)
    source_backend: str | None = None      # the backend that originally answered (replay)
    stored_cut: list[str] | None = None    # what the stored-size caps cut from raw_reply/sent (stages/judge/reply_caps.py)
    concurrency: int | None = None         # openai: calls allowed in flight when sent (falls on 429 storms)
    order: list[int] | None = None         # a call made at once with others of its case: its place among them


# --- Template deep judgment ----------------------------------------------------------------------

@event_type("excerpt.extracted")
class ExcerptExtracted(DomainPayload):
    case_id: str
    attribute: str
    text: str
    confidence: str | float | None = None
    similarity: float
    attempt: int
    subject: Literal["template", "rubric"] = "template"   # stages: a template field or a rubric trait
    threshold: float | None = None                        # stages: the fuzzy threshold it passed


class FailedExcerpt(Payload):
    text: str
    similarity: float


@event_type("excerpt.retried")
class ExcerptRetried(DomainPayload):
    case_id: str
    attribute: str
    attempt: int
    failed: list[FailedExcerpt]
    subject: Literal["template", "rubric"] = "template"
    threshold: float | None = None


@event_type("excerpt.missing")
class ExcerptMissing(DomainPayload):
    case_id: str
    attribute: str
    subject: Literal["template", "rubric"] = "template"
    threshold: float | None = None
    failed: list[FailedExcerpt] = []                      # the final attempt's failed quotes
    error: str | None = None                              # an unusable reply stopped the extraction


@event_type("risk.assessed")
class RiskAssessed(DomainPayload):
    case_id: str
    attribute: str
    subject: Literal["template", "rubric"] = "template"
    risk: Literal["none", "low", "medium", "high"] | None = None   # the maximum over the excerpts
    excerpts: list[dict[str, Any]] = []                   # {text, risk, justification}
    searches: list[dict[str, Any]] = []                   # {excerpt, results}: how many hits each search gave


@event_type("reasoning.generated")
class ReasoningGenerated(DomainPayload):
    case_id: str
    reasoning: dict[str, str] = {}
    risks: dict[str, str] = {}
    error: str | None = None                              # the reasoning call failed; reasoning is empty


@event_type("answer.parsed")
class AnswerParsed(DomainPayload):
    case_id: str
    values: dict[str, Any] = {}
    deep_judgment: bool = False


@event_type("field.verified")
class FieldVerified(DomainPayload):
    case_id: str
    field: str
    primitive: dict[str, Any]
    extracted: Any = None
    expected: Any = None
    passed: bool | None
    weight: float = 1.0
    reason: str | None = None
    embedder: str | None = None  # SemanticMatch fields: the embedder that decided
    auto_failed: bool = False    # the case auto-failed: passed is false whatever the primitive said
    primitive_passed: bool | None = None  # with auto_failed: the primitive's own verdict


@event_type("case.auto_failed")
class CaseAutoFailed(DomainPayload):
    case_id: str
    reasons: list[str]
    attributes: list[str] = []                            # template attributes without a valid excerpt
    traits: list[str] = []                                # deep rubric traits without a valid excerpt


@event_type("case.judged")
class CaseJudged(DomainPayload):
    case_id: str
    verdict: Literal["pass", "fail"]
    auto_failed: bool
    reasons: list[str]
    score: float | None = None                            # weighted share of counted fields that passed
    strategy: dict[str, Any] | None = None                # the verdict rule ({"type": "all_of"} ...)
    deep_judgment: bool = False
    fields: dict[str, list[str]] | None = None            # {passed, failed, unverifiable}
    rubric_only: bool = False                             # no template: the verdict is the rubric's auto-fail only
    abstained: bool = False                               # the response refused or evaded (abstention.detected)


# --- Rubrics -------------------------------------------------------------------------------------

@event_type("trait.scored")
class TraitScored(DomainPayload):
    case_id: str
    trait: str
    mode: Literal["deep", "standard"]
    score: bool | int | float | None
    kind: Literal["llm", "regex", "metric"] = "llm"
    reasoning: str | None = None
    excerpts: list[str] = []
    risk: str | None = None
    plan: dict[str, Any] | None = None                    # deep traits: the resolved settings and their source
    degraded: list[str] = []                              # deep traits: steps that failed and how it went on
    metrics: dict[str, float | None] | None = None        # metric traits: computed from counts, not asked
    counts: dict[str, int] | None = None                  # metric traits: tp, fn, fp, tn
    error: str | None = None                              # regex traits: why there is no match result (out of time)


@event_type("trait.auto_failed")
class TraitAutoFailed(DomainPayload):
    case_id: str
    trait: str
    reason: str | None = None
    retries: int = 0
    plan: dict[str, Any] | None = None


@event_type("abstention.detected")
class AbstentionDetected(DomainPayload):
    """The response refused or evaded the question; it fails as abstained, before any auto-fail."""

    case_id: str
    evidence: str                          # the words of the response that refuse or evade
    reasoning: str = ""
    skipped_auto_fail: list[str] = []      # auto-fail reasons the abstention took priority over


# --- Repeated judging (stages.repeats) -----------------------------------------------------------

@event_type("repeat.judged")
class RepeatJudged(DomainPayload):
    """One repeat of a case judged ``judge_repeats`` > 1 times: its sampling and what it found."""

    case_id: str
    repeat: int                                           # 0 .. K-1; its events' keys carry ``repeat<r>``
    sampling: dict[str, Any]                              # sent with every judge call: {"seed": r, ...}
    verdict: Literal["pass", "fail"] | None = None        # template cases; None for reconstruction and audit
    score: float | None = None
    auto_failed: bool = False
    abstained: bool = False
    traits: dict[str, bool | int | float | None] = {}     # rubric trait -> score
    claims: dict[str, int | float | None] = {}            # claim id -> score (reconstruction)
    credit_score: int | None = None                       # audit
    zone: str | None = None


@event_type("case.repeated")
class CaseRepeated(DomainPayload):
    """The rule that made a case verdict of its repeats' verdicts, and what it decided."""

    case_id: str
    repeats: int
    rule: Literal["majority", "all"]
    tie: Literal["pass", "fail"]
    verdicts: list[Literal["pass", "fail"] | None]
    seeds: list[int | None] = []
    verdict: Literal["pass", "fail"] | None = None       # None: the repeats score, they have no verdict
    passed: int | None = None
    flips: int | None = None                              # verdict changes from one repeat to the next
    unstable: bool | None = None                          # the repeats did not all agree


# --- Reconstruction ------------------------------------------------------------------------------

@event_type("claim.scored")
class ClaimScored(DomainPayload):
    case_id: str
    claim_id: str
    score: int
    justification: str
    evidence_refs: list[str]
    claim_text: str | None = None
    claim_type: str | None = None
    importance: int | float | None = None
    doc_id: str | None = None
    band: Literal["fully", "partially", "not"] | None = None  # under `bands`, the configured claim_bands
    bands: dict[str, int] | None = None                       # {fully_min, partially_min} the run used


# --- Audit (VerifyFast) --------------------------------------------------------------------------

class AuditError(Payload):
    model_config = ConfigDict(frozen=True, extra="allow", allow_inf_nan=False)
    level: str
    severity: Literal["high", "low"]
    detail: str


@event_type("facts.decomposed")
class FactsDecomposed(DomainPayload):
    case_id: str
    facts: list[str] = []
    reasoning_chains: list[dict[str, Any]] = []


@event_type("facts.checked")
class FactsChecked(DomainPayload):
    case_id: str
    errors: list[AuditError]
    inferences: list[dict[str, Any]] = []       # reasonable inferences: recorded, never counted
    counted: list[int] | None = None            # indexes of the errors that reach the score (None: all)
    dropped: int = 0                            # errors beyond max_errors_per_phase
    max_errors_per_phase: int | None = None


@event_type("logic.checked")
class LogicChecked(DomainPayload):
    case_id: str
    errors: list[AuditError]
    inferences: list[dict[str, Any]] = []
    counted: list[int] | None = None
    dropped: int = 0
    max_errors_per_phase: int | None = None


@event_type("credit.scored")
class CreditScored(DomainPayload):
    case_id: str
    high: int
    low: int
    credit_score: int
    zone: Literal["BAD", "MID", "GOOD"]
    formula: dict[str, Any] | None = None                 # the strategy parameters that decided
    expected_credit_score: int | None = None
    expected_zone: Literal["BAD", "MID", "GOOD"] | None = None


# --- Operations ----------------------------------------------------------------------------------

@event_type("stage.failed")
class StageFailed(DomainPayload):
    case_id: str | None = None
    stage: str
    reason: str
    failure: int = 1                                      # 1 for the first failure of this case and stage
    # When a judge call caused it: the call's role and request hash, and whether it was a replay's
    # request the source never recorded (so nothing ever parses ``reason`` to find them).
    role: str | None = None
    request_hash: str | None = None
    unrecorded: bool = False


@event_type("run.started")
class RunStarted(DomainPayload):
    run: str
    judge: dict[str, Any] | None = None                   # {backend, model}
    config: dict[str, Any] | None = None                  # the run-level effective config
    configs: dict[str, Any] = {}                          # config_hash -> effective config of the cases to do


@event_type("run.completed")
class RunCompleted(DomainPayload):
    run: str
    judge: dict[str, Any] | None = None
    configs: dict[str, Any] = {}                          # config_hash -> effective config of the cases done
    cases: int = 0
    judged: int = 0
    failed: int = 0
    stopped: str | None = None                            # why the run stopped early (the judge could not answer)
    pending: int | None = None                            # cases a stopped run left pending


@event_type("run.reconciled")
class RunReconciled(DomainPayload):
    """A full reconcile found cases pending at or below a stage's tracking position (they had been
    passed over); the run lowered the position below them and ran them."""
    run: str
    stage: str
    tracking_position: int                                # the position that had passed them
    lowered_to: int
    cases: list[str] = []


@event_type("replay.started")
class ReplayStarted(DomainPayload):
    """The first event of a home made by ``evalledger replay``: where it came from, under what change."""
    source: str                                           # the source home (or ledger file)
    source_head_seq: int
    source_head_hash: str
    overrides: dict[str, Any] = {}                        # the --set layer applied over each case's config
    live: str | None = None                               # the live backend for unrecorded requests, if any


@event_type("store.migrated")
class StoreMigrated(Payload):
    """The first event a home gets from ``evalledger migrate``: every event before it was copied,
    byte for byte, from ``source`` up to its head; later events use the blob store."""
    source: str                                           # the old home, left as it was
    source_head_seq: int
    source_head_hash: str
    events: int                                           # events copied (seq 1 .. source_head_seq)
    blob_types: list[str] = []                            # event types whose payloads the blob store splits
    mirror: str = "jsonl"                                 # the new home's mirror: events.jsonl, or gzip (.gz)
    rows: str = "text"                                    # the new ledger.db's rows: text, or compact


@event_type("note.added")
class NoteAdded(Payload):
    text: str
    author: str | None = None


@event_type("verdict.overridden")
class VerdictOverridden(Payload):
    case_id: str
    verdict: Literal["pass", "fail"]
    reason: str
    author: str


@event_type("verdict.confirmed")
class VerdictConfirmed(Payload):
    """A reviewer checked the judge's verdict and agrees with it (a human label, like an override)."""
    case_id: str
    verdict: Literal["pass", "fail"]                      # the judge's verdict the reviewer confirmed
    author: str
    reason: str = ""


@event_type("checkpoint.signed")
class CheckpointSigned(Payload):
    """A signed checkpoint of the ledger up to ``size`` events (``evalledger checkpoint``)."""
    size: int                                             # events covered: seq 1 .. size
    head: str                                             # the chain hash of the event at seq ``size``
    root: str                                             # RFC 6962 Merkle root over seq 1 .. size (hex)
    note: str                                             # the signed note, exactly as published
    key: str                                              # the verifier key's name+hash (never the key itself)
