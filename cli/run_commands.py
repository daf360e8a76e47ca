"""``evalledger run``: process everything pending until idle, then exit (no domain logic here).

``add_judge_options`` and ``run_settings`` are the judge and config options any command that runs
the stages takes (``run``; the watch daemon can share them).
"""

from __future__ import annotations

import os
import sys

from evalledger.cli.errors import UsageError
from evalledger.cli.ledger_commands import open_existing
from evalledger.cli.progress import Progress
from evalledger.ledger import DiskFull
from evalledger.stages.config import ConfigError, run_layer
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.stages.judge import JudgeError
from evalledger.stages.judge.shared_limit import check_shared

# The judge server could not answer (unreachable, credentials refused, failing): the run stopped
# early with its cases pending. Not a finding (1) nor a usage error (2): running again finishes.
EXIT_STOPPED = 3


def add_judge_options(p) -> None:
    """--judge, --model, --config, --set, --no-cache, --concurrency, --response-format and the provider settings."""
    p.add_argument("--judge", choices=("offline", "openai", "replay"), default=None,
                   help="judge backend (default: the config's judge_backend, else offline); "
                        "'replay' is refused here: use 'evalledger replay --into DIR'")
    p.add_argument("--model", default=None, help="judge model (openai: required unless OPENAI_MODEL is set)")
    p.add_argument("--config", dest="config_file", default=None, metavar="FILE",
                   help="a TOML or JSON file of VerificationConfig keys (wins over a benchmark's config)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="one config key (dotted for nested: audit.high_severe_min=4); wins over --config")
    p.add_argument("--no-cache", action="store_true", help="do not reuse recorded judge replies")
    p.add_argument("--concurrency", type=int, default=None, help="judge calls in flight at once")
    p.add_argument("--shared-concurrency", type=int, default=None, metavar="N",
                   help="with a PostgreSQL --store: judge calls in flight to this judge server across ALL "
                        "workers of the store, kept in the store (later workers follow it; 0 removes it)")
    p.add_argument("--response-format", choices=("json_schema", "json_object", "prompt"), default=None,
                   help="how the openai judge sends the reply schema (default: the config's "
                        "judge_response_format, else json_schema; a refusal moves to the next mode)")
    add_provider_options(p)


# --flag -> the judge_options key it sets (docs/judge.md gives the bounds).
PROVIDER_FLAGS = {"temperature": "--temperature", "max_tokens": "--max-tokens",
                  "max_completion_tokens": "--max-completion-tokens", "timeout_s": "--timeout",
                  "max_reply_bytes": "--max-reply-bytes", "breaker_failures": "--breaker-failures"}


def add_provider_options(p) -> None:
    """The judge server's provider settings; each wins over the config's ``judge_options``."""
    g = p.add_argument_group("judge server settings (openai judge; bounds in docs/judge.md)")
    g.add_argument("--temperature", default=None, metavar="T|omit",
                   help="sampling temperature 0-2 (default 0); 'omit' sends none, for reasoning models")
    g.add_argument("--max-tokens", type=int, default=None, metavar="N", help="max_tokens of a reply")
    g.add_argument("--max-completion-tokens", type=int, default=None, metavar="N",
                   help="max_completion_tokens of a reply (reasoning models)")
    g.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="seconds a request may take, reply included (default 60)")
    g.add_argument("--max-reply-bytes", type=int, default=None, metavar="N",
                   help="a longer reply body is an invalid reply (default 1048576)")
    g.add_argument("--breaker-failures", type=int, default=None, metavar="N",
                   help="consecutive server failures that stop the run, cases left pending (default 8)")


def provider_options(args) -> dict:
    """The JudgeSettings keys the provider flags set; a value out of bounds is a usage error."""
    from pydantic import ValidationError

    from evalledger.stages.config import JudgeOptions
    given = {key: getattr(args, key, None) for key in PROVIDER_FLAGS}
    given = {key: value for key, value in given.items() if value is not None}
    if given.get("temperature") not in (None, "omit"):
        try:
            given["temperature"] = float(given["temperature"])
        except ValueError:
            raise UsageError(f"--temperature takes a number from 0 to 2 or 'omit', not {given['temperature']!r}") from None
    try:
        return JudgeOptions(**given).settings_keys()
    except ValidationError as exc:
        err = exc.errors()[0]
        raise UsageError(f"{PROVIDER_FLAGS[str(err['loc'][0])]}: {err['msg']}") from None


def run_settings(args, **flags) -> RunSettings:
    """The dispatcher's settings from ``add_judge_options``' arguments; a bad key is a usage error."""
    try:
        layer = run_layer(args.config_file, args.sets + repeats_set(args))
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if args.concurrency is not None and args.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    options = {"concurrency": args.concurrency} if args.concurrency else {}
    shared = getattr(args, "shared_concurrency", None)
    if shared is not None:
        if shared < 0:
            raise UsageError("--shared-concurrency must be 0 (remove the budget) or more")
        options["shared_concurrency"] = shared
    if getattr(args, "response_format", None):
        options["response_format"] = args.response_format
    options.update(provider_options(args))
    flags.update(run_limits(args, layer))
    settings = RunSettings(config_layer=layer, judge_backend=args.judge, judge_model=args.model,
                           judge_options=options, no_cache=args.no_cache, **flags)
    try:
        backend = settings.judge_settings().backend
    except (ConfigError, ValueError, JudgeError) as exc:
        raise UsageError(str(exc)) from None
    if backend == "replay":
        # The replay judge answers from a source ledger; here the source would be the home itself,
        # which has no answer for a case not yet judged: every pending case would fail for good.
        raise UsageError("the replay judge re-runs a home into a NEW home: use "
                         "'evalledger --home SOURCE replay --into DIR' (run and watch judge with offline or openai)")
    try:
        settings.check_judge()
    except (ConfigError, ValueError, JudgeError) as exc:   # no model, no key, a bad judge option
        raise UsageError(str(exc)) from None
    if settings.max_cost is not None and not getattr(settings.profiles, "profiles", None):
        judge = settings.judge_settings()
        model = judge.model or os.environ.get("OPENAI_MODEL")   # as the openai backend resolves it
        if judge.backend == "openai" and model not in settings.run_config().prices:
            raise UsageError(f"--max-cost needs a price for the judge model {model!r}: "
                             "set prices.<model> in --config")
    return settings


def repeats_set(args) -> list[str]:
    """``--repeats K`` as the ``--set judge_repeats=K`` it stands for (it wins over --config and --set)."""
    from evalledger.stages.config import MAX_REPEATS
    repeats = getattr(args, "repeats", None)
    if repeats is None:
        return []
    if not 1 <= repeats <= MAX_REPEATS:
        raise UsageError(f"--repeats takes 1 to {MAX_REPEATS} (judge each case that many times), not {repeats}")
    return [f"judge_repeats={repeats}"]


def committed_account(led) -> str:
    """What the ledger holds now, read back from it: the head and the cases by state."""
    from evalledger.stages.intake_status import case_states
    states = list(case_states(led).values())
    return (f"Committed: every event up to seq {led.head().seq}; cases: {states.count('judged')} judged, "
            f"{states.count('failed')} failed, {states.count('opened')} still pending (a rerun takes them up)")


def add_profile_options(p) -> None:
    """--models, --profile, --profiles, --max-calls, --max-cost (``run`` only)."""
    p.add_argument("--models", dest="models_file", default=None, metavar="FILE",
                   help="the models file: named models and profiles (default: <home>/models.toml)")
    p.add_argument("--profile", dest="profile_names", action="append", default=[], metavar="NAME",
                   help="judge under this profile of the models file (repeatable)")
    p.add_argument("--profiles", dest="profile_list", default=None, metavar="A,B",
                   help="judge under each of these profiles (comma-separated)")
    p.add_argument("--max-calls", type=int, default=None, metavar="N",
                   help="stop after N model calls; the cases not judged stay pending")
    p.add_argument("--max-cost", type=float, default=None, metavar="USD",
                   help="stop once the calls cost USD (needs a price for every model); cases stay pending")


def run_limits(args, layer) -> dict:
    """The ``profiles``, ``max_calls`` and ``max_cost`` RunSettings of ``add_profile_options``' arguments."""
    from evalledger.cli.errors import UsageError
    from evalledger.cli.ledger_commands import home_of
    from evalledger.stages.models_file import default_models_path
    from evalledger.stages.profiles import AnsweringPlan, ProfilePlan
    out: dict = {}
    for flag, value in (("--max-calls", getattr(args, "max_calls", None)), ("--max-cost", getattr(args, "max_cost", None))):
        if value is not None and value < 0:
            raise UsageError(f"{flag} must be at least 0, not {value:g}")
    if getattr(args, "max_calls", None) is not None:
        out["max_calls"] = args.max_calls
    if getattr(args, "max_cost", None) is not None:
        out["max_cost"] = args.max_cost
    names = list(getattr(args, "profile_names", None) or [])
    names += [n.strip() for n in (getattr(args, "profile_list", None) or "").split(",") if n.strip()]
    if not names:
        if not hasattr(args, "models_file"):   # not `run` (the watch daemon takes no models file)
            return out
        path = args.models_file or default_models_path(home_of(args))
        models = _models_file(path) if path else None
        if args.models_file and not models.answering:
            raise UsageError(f"--models names {path}, but no --profile or --profiles says which profile "
                             "to run (and it lists no answering models)")
        if models is not None and models.answering:
            out["profiles"] = _priced(AnsweringPlan(models.answering), out, layer)
        return out
    path = args.models_file or default_models_path(home_of(args))
    if path is None:
        raise UsageError(f"--profile needs a models file: pass --models FILE or write {home_of(args)}/models.toml "
                         "(docs/judge.md: the models file)")
    if args.judge or args.model:
        raise UsageError("a profile names its judge: --judge and --model do not go with --profile/--profiles")
    try:
        plan = ProfilePlan(_models_file(path).select(names))
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    out["profiles"] = _priced(plan, out, layer)
    return out


def _models_file(path):
    """The models file at ``path``; its problems are a usage error."""
    from evalledger.cli.errors import UsageError
    from evalledger.stages.models_file import load_models_file
    try:
        return load_models_file(path)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def _priced(plan, limits: dict, layer):
    """``plan``, refused (usage error) under --max-cost when one of its models has no price."""
    from evalledger.cli.errors import UsageError
    from evalledger.stages.config import effective_config
    if limits.get("max_cost") is not None:
        unpriced = plan.unpriced(effective_config(None, layer))
        if unpriced:
            raise UsageError(f"--max-cost needs a price for every model, and the price table has none for "
                             f"{', '.join(unpriced)} (set prices.<model> in --config)")
    return plan


def register(sub) -> None:
    """Add the ``run`` command."""
    p = sub.add_parser("run", help="judge every pending case until idle, then exit",
                       description="Process everything pending until idle, then exit. The judge defaults "
                                   "to the configuration's judge_backend, which defaults to offline. Exit "
                                   "codes: 0 all judged (also when --max-calls/--max-cost stopped the run, "
                                   "cases left pending), 1 a case failed, 2 usage error, 3 stopped early "
                                   "because the judge server could not answer (cases left pending).",
                       # the first example comes from cli/main.py's EXAMPLES, put before these
                       epilog="a reasoning model:\n  evalledger run --judge openai --model o3-mini --temperature omit "
                              "--max-completion-tokens 4000 --timeout 180\n"
                              "with profiles and a budget:\n  evalledger run --profiles kimi-full,cross-verify "
                              "--config prices.toml --max-cost 2.50\n"
                              "each case judged 3 times, the verdict by majority:\n  evalledger run --judge openai "
                              "--model gpt-4o-mini --repeats 3 --temperature 0.7")
    add_judge_options(p)
    add_profile_options(p)
    p.add_argument("--repeats", type=int, default=None, metavar="K",
                   help="judge each case K times (seed r on repeat r), the verdict by repeat_rule "
                        "(majority or all); the same as --set judge_repeats=K")
    p.add_argument("--retry-failed", action="store_true", help="try the cases with stage.failed again")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    p.add_argument("--lease-seconds", type=float, default=None, metavar="S",
                   help="with a PostgreSQL --store shared by several workers: how long a claimed case stays "
                        "this worker's without a heartbeat (default 30); a dead worker's cases go to another")
    p.set_defaults(func=cmd_run)


def cmd_run(args) -> int:
    """Run until idle; exit 1 when a case (or an answer) failed (its stage.failed says why), 3 when the
    judge server could not answer and the run stopped early (cases left pending), else 0.

    A spent budget (--max-calls, --max-cost) is an intended stop, not an error: it prints
    ``stopped: ...`` and exits 0 (1 if a case failed); the cases left pending wait for the next run.
    """
    from evalledger.cli.errors import UsageError
    if args.lease_seconds is not None and args.lease_seconds <= 0:
        raise UsageError("--lease-seconds must be more than 0")
    lease = {"lease_seconds": args.lease_seconds} if args.lease_seconds else {}
    settings = run_settings(args, retry_failed=args.retry_failed, **lease)
    progress = None if args.quiet else Progress(sys.stderr)
    with open_existing(args) as led:
        try:
            check_shared(settings.judge_settings(), led)
            summary = run_until_idle(led, settings, progress)
        except (ConfigError, ValueError, JudgeError) as exc:   # a judge that cannot be set up
            raise UsageError(str(exc)) from None
        except DiskFull as exc:
            if progress is not None and progress.tty:
                progress.stream.write("\n")   # off the progress bar's line
            # The account is read back from the ledger after the run stopped: cases in flight
            # when the disk filled may have committed after the append that failed.
            print(f"evalledger run: stopped: the disk is full ({exc.reason}); nothing of the batch that hit it "
                  f"was committed. {committed_account(led)}; free space and run the command again", file=sys.stderr)
            return 1
    if summary.busy:
        print("another run is processing this ledger in this process; it will take these cases")
        return 0
    if summary.cases == 0 and not summary.stopped and not summary.failures:
        print("nothing pending")
        if args.config_file or args.sets:
            print("  a new --config or --set applies to cases not judged yet; to judge the judged ones again "
                  "under it, replay them into a new home: evalledger replay --into DIR --set KEY=VALUE "
                  "(answers from the recorded calls) or with --live")
        return 0
    if settings.judge_settings().backend == "offline":
        print("judge: offline, a heuristic baseline, not a language model; use --judge openai for verdicts "
              "that matter")
    print(f"run {summary.run_id}: {summary.cases} case(s), {summary.judged} judged, {summary.failed} failed, "
          f"{summary.judge_calls} judge call(s), {summary.retries} retr{'y' if summary.retries == 1 else 'ies'}")
    if summary.model_calls and summary.cost_usd != 0:   # the offline judge costs nothing: no line
        print(f"cost of this run: {summary.model_calls} model call(s), "
              + (f"{summary.cost_usd:.6f} USD" if summary.cost_usd is not None
                 else "unknown (a model with no price in the config's price table)"))
    for failure in summary.failures:
        print(f"  failed {failure['stage']} case {failure['case_id']}: {failure['reason']}")
    if summary.stopped:
        if summary.stop == "judge_unavailable":
            print(f"evalledger run: stopped early: {summary.stopped}; {summary.pending} case(s) left pending, "
                  "none failed by it (run again to finish them)", file=sys.stderr)
            return EXIT_STOPPED
        print(f"stopped: {summary.stopped}; {summary.left_pending} case(s) left pending "
              "(run again, with a larger budget, to finish them)")
    return 1 if summary.failed or summary.failures else 0
