"""The shape of the command line: every command, its arguments, help and handler.

Building the parser imports no command implementation: a handler is named by module and function
(``Handler``) and imported when its command runs, so ``evalledger --help`` and a mistyped option
cost only argparse (tests/test_cli_lazy.py checks that nothing heavy is imported). Defaults shown
in the help come from modules that import nothing heavy (``stages.limits``).
"""

from __future__ import annotations

import importlib

from evalledger.stages.limits import DEFAULT_MAX_BYTES, DEFAULT_MAX_RESPONSE_CHARS, MAX_RESPONSE_CHARS_LIMIT

# The log formats of watch and demo (cli.watch_log.FORMATS) and the review queue's strata
# (projections.review_queue.STRATA), repeated here so that building the parser does not import
# those modules; tests/test_cli_lazy.py checks they agree.
LOG_FORMATS = ("text", "json")
STRATA = ("verdict", "model", "benchmark")


class Handler:
    """A command's handler, ``evalledger.cli.<module>.<function>``, imported when the command runs."""

    def __init__(self, module: str, function: str):
        self.module = f"evalledger.cli.{module}"
        self.function = function

    def resolve(self):
        """The handler function itself (imports its module)."""
        return getattr(importlib.import_module(self.module), self.function)

    def __call__(self, args) -> int:
        return self.resolve()(args)

    def __repr__(self) -> str:
        return f"Handler({self.module}.{self.function})"


def register_ledger(sub) -> None:
    """Add the ledger commands (init, note, log, verify, export, import, migrate) to the parser."""
    p = sub.add_parser("init", help="create a home (inbox, processed, rejected, reports, ledger)")
    p.add_argument("--mirror", choices=("jsonl", "gzip"), default="jsonl",
                   help="the JSONL mirror beside ledger.db: plain events.jsonl (the default), or "
                        "events.jsonl.gz, compressed as it is written (for a new home only)")
    p.add_argument("--rows", choices=("text", "compact"), default="text",
                   help="how ledger.db stores each event: hex and JSON text (the default), or compact "
                        "(payloads deflated, ids and hashes as raw bytes: about half the bytes; new homes only)")
    p.set_defaults(func=Handler("ledger_commands", "cmd_init"))

    p = sub.add_parser("note", help="append a note.added event to a stream")
    p.add_argument("stream", help="a case id or unique prefix, or a stream such as benchmark:<id>")
    p.add_argument("text")
    p.add_argument("--author", default=None)
    p.add_argument("--new-stream", action="store_true",
                   help="allow a stream that does not exist yet (refused otherwise, to catch typos)")
    p.set_defaults(func=Handler("ledger_commands", "cmd_note"))

    p = sub.add_parser("log", help="list events, readable or as JSONL envelopes")
    p.add_argument("--type", action="append", default=None, help="only this event type (repeatable)")
    p.add_argument("--stream", default=None, help="only this stream")
    p.add_argument("--from", dest="from_seq", type=int, default=1, help="start at this seq")
    p.add_argument("--json", action="store_true", help="one JSON envelope a line")
    p.set_defaults(func=Handler("ledger_commands", "cmd_log"))

    p = sub.add_parser("verify", help="recompute the hash chain over the stored bytes",
                       epilog="more:\n  evalledger verify --expect-head published-heads.txt --projections\n"
                              "  evalledger verify --against checkpoints.jsonl --pubkey witness.pub")
    p.add_argument("--expect-head", default=None, metavar="SEQ:HASH|FILE",
                   help="also check that a head published earlier is still a prefix; or FILE, a list of "
                        "published heads (SEQ:HASH or {\"seq\":..,\"hash\":..} a line): names the latest "
                        "that holds and the first that does not")
    p.add_argument("--projections", action="store_true",
                   help="also fold the events afresh and compare with the stored read models (proj_* tables)")
    p.add_argument("--repair", action="store_true",
                   help="first complete a mirror that is behind SQLite and cut a torn last line "
                        "(what any writing command does); without it verify changes nothing")
    p.add_argument("--against", default=None, metavar="CHECKPOINTS",
                   help="prove the ledger extends every checkpoint of this file (checkpoints.jsonl or a "
                        "witness's copy); names the first it no longer extends")
    p.add_argument("--pubkey", default=None, metavar="KEY",
                   help="with --against: also check each checkpoint's signature with this verifier key")
    p.add_argument("--json", action="store_true",
                   help="the result as one JSON object: ok, head, counts, findings, published heads, read "
                        "models, checkpoints and the Merkle root (when checkpoints were checked)")
    p.set_defaults(func=Handler("verify_commands", "cmd_verify"))

    p = sub.add_parser("export", help="write the ledger as canonical JSONL")
    p.add_argument("--out", default=None, help="file to write (default: standard output)")
    p.set_defaults(func=Handler("ledger_commands", "cmd_export"))

    p = sub.add_parser("import", help="import an exported JSONL ledger into an empty home")
    p.add_argument("file")
    p.set_defaults(func=Handler("ledger_commands", "cmd_import"))

    p = sub.add_parser("migrate", help="copy this home into a new home that keeps judge calls' large parts "
                                       "in the blob store (the old home is left as it was)")
    p.add_argument("--to", required=True, metavar="NEW_HOME", help="the new home to write (must not exist, or be empty)")
    p.add_argument("--mirror", choices=("jsonl", "gzip"), default="jsonl",
                   help="the new home's mirror: plain events.jsonl (the default) or compressed events.jsonl.gz")
    p.add_argument("--rows", choices=("text", "compact"), default="text",
                   help="the new ledger.db's rows: text (the default) or compact (see init --rows)")
    p.set_defaults(func=Handler("ledger_commands", "cmd_migrate"))


def add_max_response_chars(p) -> None:
    """The --max-response-chars option (ingest, validate and watch)."""
    p.add_argument("--max-response-chars", type=int, default=DEFAULT_MAX_RESPONSE_CHARS, metavar="N",
                   help=f"reject a file with a response longer than N characters (default "
                        f"{DEFAULT_MAX_RESPONSE_CHARS:,}, at most {MAX_RESPONSE_CHARS_LIMIT:,})")


def register_intake(sub) -> None:
    """Add the ``ingest``, ``validate``, ``rebind``, ``source`` and ``status`` commands to the parser."""
    p = sub.add_parser("ingest", help="ingest benchmark, responses, reconstruction, audit or Karenina files")
    p.add_argument("files", nargs="*", metavar="FILE",
                   help="files, or folders (their .json, .jsonl and .jsonld files), to ingest "
                        "(default: every file in the home's inbox/)")
    p.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES,
                   help=f"reject files larger than this (default {DEFAULT_MAX_BYTES} = 50 MB)")
    add_max_response_chars(p)
    p.set_defaults(func=Handler("intake_commands", "cmd_ingest"))

    p = sub.add_parser("validate", help="check files as ingest would, writing nothing to the ledger")
    p.add_argument("files", nargs="+", metavar="FILE", help="files, or folders (their .json, .jsonl and .jsonld files)")
    p.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES,
                   help=f"the size limit ingest would apply (default {DEFAULT_MAX_BYTES} = 50 MB)")
    add_max_response_chars(p)
    p.set_defaults(func=Handler("intake_commands", "cmd_validate"))

    p = sub.add_parser("rebind", help="judge the responses of a benchmark's earlier versions against its latest")
    p.add_argument("name", help="the benchmark's name (or the id of one of its versions)")
    p.set_defaults(func=Handler("intake_commands", "cmd_rebind"))

    p = sub.add_parser("source", help="the bytes of the file a case was ingested from (from the store, or "
                                      "this home's processed/), on stdout or into --out")
    p.add_argument("case", help="case id (or a unique prefix)")
    p.add_argument("--out", metavar="FILE", default=None, help="write the bytes here instead of stdout")
    p.set_defaults(func=Handler("intake_commands", "cmd_source"))

    p = sub.add_parser("status", help="benchmarks, cases by state, pending responses, rejected files, head")
    p.add_argument("--json", action="store_true", help="print the status as JSON")
    p.set_defaults(func=Handler("intake_commands", "cmd_status"))


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


def add_provider_options(p) -> None:
    """The judge server's provider settings; each wins over the config's ``judge_options``."""
    g = p.add_argument_group("judge server settings (openai judge; bounds in docs/judge.md)")
    g.add_argument("--temperature", default=None, metavar="T|omit",
                   help="sampling temperature 0-2 (default 0); 'omit' sends none, for reasoning models")
    g.add_argument("--max-tokens", type=int, default=None, metavar="N", help="max_tokens of a reply")
    g.add_argument("--max-completion-tokens", type=int, default=None, metavar="N",
                   help="max_completion_tokens of a reply (reasoning models)")
    g.add_argument("--timeout", dest="timeout_s", type=float, default=None, metavar="S",
                   help="seconds a request may take, reply included (default 60)")
    g.add_argument("--max-reply-bytes", type=int, default=None, metavar="N",
                   help="a longer reply body is an invalid reply (default 1048576)")
    g.add_argument("--breaker-failures", type=int, default=None, metavar="N",
                   help="consecutive server failures that stop the run, cases left pending (default 8)")
    g.add_argument("--retry-after-max", dest="retry_after_max_s", type=float, default=None, metavar="S",
                   help="the longest wait a server's Retry-After gets before the next attempt (default 120)")


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


def register_run(sub) -> None:
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
    p.set_defaults(func=Handler("run_commands", "cmd_run"))


def add_checkpoint_options(p) -> None:
    """The daemon's checkpoint options."""
    p.add_argument("--checkpoint-key", default=None, metavar="FILE",
                   help="sign a checkpoint with this key (keygen) every N new events or M minutes")
    p.add_argument("--checkpoint-events", type=int, default=None, metavar="N",
                   help="with --checkpoint-key: every N new events (default 1000 unless --checkpoint-minutes)")
    p.add_argument("--checkpoint-minutes", type=float, default=None, metavar="M",
                   help="with --checkpoint-key: every M minutes, when there are new events")
    p.add_argument("--publish", action="append", default=None, metavar="URL|FILE",
                   help="with --checkpoint-key: also POST each checkpoint to URL or append it to FILE")


def add_watch_options(p) -> None:
    """The daemon's options, then the judge and config options a run takes."""
    p.add_argument("--once", action="store_true",
                   help="process the inbox and all pending work, then exit (for scripts and tests)")
    p.add_argument("--rescan-seconds", type=float, default=30.0, metavar="S",
                   help="rescan the inbox every S seconds as a safety net for lost events (default 30)")
    p.add_argument("--polling", action="store_true",
                   help="poll the folders instead of kernel notifications (network filesystems)")
    p.add_argument("--log-format", choices=LOG_FORMATS, default="text",
                   help="log lines on stderr: text (default) or json, one object a line")
    add_judge_options(p)  # the same judge and config options as `evalledger run`
    add_checkpoint_options(p)
    p.add_argument("--grace-seconds", type=float, default=10.0, metavar="S",
                   help="after SIGTERM/SIGINT, let in-flight work finish for S seconds before abandoning it")
    add_max_response_chars(p)


def register_watch(sub) -> None:
    """Add the ``watch`` command to the parser."""
    p = sub.add_parser("watch", help="daemon: ingest files dropped into the inbox, judge them, refresh reports")
    add_watch_options(p)
    p.set_defaults(func=Handler("watch_commands", "cmd_watch"))


def register_demo(sub) -> None:
    """Add the ``demo`` command to the parser."""
    p = sub.add_parser("demo", help="a temporary home with the sample benchmarks, judged offline end to end")
    p.add_argument("--samples", default=None, metavar="DIR", help="the benchmark files to use "
                   "(default: benchmarks/samples)")
    p.add_argument("--dir", default=None, metavar="DIR", help="create the demo home under DIR "
                   "(default: the system's temporary folder)")
    p.add_argument("--log-format", choices=LOG_FORMATS, default="text", help="log lines on stderr")
    p.set_defaults(func=Handler("demo", "cmd_demo"))


def register_report(sub) -> None:
    """Add report, rebuild, history, override, confirm, replay and diff."""
    p = sub.add_parser("report", help="update the read models and write <home>/reports/")
    p.set_defaults(func=Handler("report_commands", "cmd_report"))

    p = sub.add_parser("rebuild", help="drop every read model, fold from seq 1, rewrite the reports")
    p.set_defaults(func=Handler("report_commands", "cmd_rebuild"))

    p = sub.add_parser("history", help="the exact ordered stage history of one case, with its judge calls")
    p.add_argument("case", help="case id (or a unique prefix)")
    p.add_argument("--json", action="store_true", help="the history as JSON")
    p.set_defaults(func=Handler("report_commands", "cmd_history"))

    p = sub.add_parser("override", help="record a reviewer's verdict for a case (verdict.overridden)")
    p.add_argument("case", help="case id (or a unique prefix)")
    p.add_argument("--verdict", choices=("pass", "fail"), required=True)
    p.add_argument("--reason", required=True)
    p.add_argument("--author", required=True)
    p.set_defaults(func=Handler("report_commands", "cmd_override"))

    p = sub.add_parser("confirm", help="record that a reviewer agrees with the judge's verdict (verdict.confirmed)")
    p.add_argument("case", help="case id (or a unique prefix)")
    p.add_argument("--author", required=True)
    p.add_argument("--reason", default="", help="optional note on why the verdict stands")
    p.set_defaults(func=Handler("report_commands", "cmd_confirm"))

    p = sub.add_parser("replay", help="re-run the stages into a new home, answering from recorded judge calls")
    p.add_argument("--into", required=True, metavar="DIR", help="the new home (must not exist or be empty)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="a config key applied over every case's config (repeatable)")
    p.add_argument("--live", nargs="?", const="auto", default=None, choices=("auto", "offline", "openai"),
                   help="call the judge for requests the source never recorded (default backend: the source's)")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    p.set_defaults(func=Handler("report_commands", "cmd_replay"))

    p = sub.add_parser("diff", help="which verdicts, scores and metrics differ between two homes, and why")
    p.add_argument("home_a")
    p.add_argument("home_b")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=Handler("report_commands", "cmd_diff"))


def register_agreement(sub) -> None:
    """Add sample, agreement and whatif."""
    p = sub.add_parser("sample", help="a deterministic review queue of judged cases nobody reviewed yet")
    p.add_argument("--n", type=int, required=True, help="how many cases")
    p.add_argument("--stratify", choices=STRATA, default=None,
                   help="share the places among verdicts, models or benchmarks in proportion to their size")
    p.add_argument("--seed", type=int, default=0, help="another seed draws another queue (default 0)")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="write here (.csv: CSV, else JSON lines); default: JSON lines on stdout")
    p.set_defaults(func=Handler("agreement_commands", "cmd_sample"))

    p = sub.add_parser("agreement", help="Cohen's kappa and the disagreements: judge vs reviewers, or vs another judge")
    p.add_argument("--against", default=None, metavar="OTHER_HOME",
                   help="compare this home's judge with the judge of OTHER_HOME on the cases both have")
    p.add_argument("--profiles", default=None, metavar="A,B",
                   help="compare the judges of two profiles of this home on the cases both judged")
    p.add_argument("--json", action="store_true", help="the whole document as JSON")
    p.set_defaults(func=Handler("agreement_commands", "cmd_agreement"))

    p = sub.add_parser("whatif", help="verdicts at every point of a config sweep, from recorded judge calls only")
    p.add_argument("--set", dest="sets", action="append", default=[], required=True,
                   metavar="KEY=START:STOP:STEP",
                   help="the setting to sweep (or KEY=V1,V2,...); more --set KEY=VALUE hold other keys fixed")
    p.add_argument("--chart", default=None, metavar="FILE",
                   help="where the SVG chart goes (default: <reports>/whatif-<key>.svg)")
    p.add_argument("--json", action="store_true", help="every point and curve as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=Handler("agreement_commands", "cmd_whatif"))


def register_proof(sub) -> None:
    """Add keygen, checkpoint, prove and check-proof."""
    p = sub.add_parser("keygen", help="make an Ed25519 key for signing checkpoints (kept outside the home)")
    p.add_argument("--out", required=True, help="the signer key file to write; the verifier key goes to OUT.pub")
    p.add_argument("--name", default="evalledger", help="the key's name in signatures (default evalledger)")
    p.set_defaults(func=Handler("proof_commands", "cmd_keygen"))

    p = sub.add_parser("checkpoint", help="sign the ledger's head and Merkle root; append and publish it")
    p.add_argument("--key", required=True, help="the signer key file keygen wrote")
    p.add_argument("--publish", action="append", metavar="URL|FILE",
                   help="also POST the note to URL, or append the line to FILE (repeatable)")
    p.set_defaults(func=Handler("proof_commands", "cmd_checkpoint"))

    p = sub.add_parser("prove", help="write a bundle proving a case's events against a signed checkpoint")
    p.add_argument("case", help="case id (or a unique prefix)")
    p.add_argument("--checkpoint", type=int, default=None, metavar="SEQ",
                   help="the checkpoint to prove against (default: the latest)")
    p.add_argument("--out", required=True, help="the bundle file to write")
    p.set_defaults(func=Handler("proof_commands", "cmd_prove"))

    p = sub.add_parser("check-proof", help="check a proof bundle (or a report's checkpoint) offline, with no ledger")
    p.add_argument("bundle", nargs="?", help="the bundle 'prove' wrote")
    p.add_argument("--pubkey", required=True, help="the publisher's verifier key file (KEY.pub)")
    p.add_argument("--report", default=None, metavar="REPORT",
                   help="instead of a bundle: check the checkpoint a report names (any report .md, or "
                        "aggregate-stats.json) against --checkpoints")
    p.add_argument("--checkpoints", default=None, metavar="FILE",
                   help="with --report: checkpoints.jsonl, or a published copy of it")
    p.set_defaults(func=Handler("proof_commands", "cmd_check_proof"))


def register_view(sub) -> None:
    """Add view."""
    p = sub.add_parser("view", help="a local web viewer of the home: overview, cases, compare, live, review")
    p.add_argument("--port", type=int, default=8765, help="port to listen on (default 8765; 0 picks a free one)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--allow-host", action="append", default=None, metavar="NAME",
                   help="with --host other than a loopback name: answer requests naming this host (repeatable), "
                        "refuse every other name (the loopback names and the bound address are answered too)")
    p.add_argument("--open", action="store_true", help="open the viewer in the default browser")
    p.add_argument("--review", action="store_true",
                   help="allow overrides and notes from case pages (needs the token URL printed at start)")
    p.add_argument("--compare", default=None, metavar="OTHER_HOME", help="compare with another home (a replay)")
    p.add_argument("--queue", default=None, metavar="FILE",
                   help="a review queue 'evalledger sample --out FILE' wrote: the case table can show just its cases")
    p.add_argument("--export", default=None, metavar="DIR", help="write a static site of the pages and exit")
    p.add_argument("--keepalive-timeout", type=float, default=15.0, metavar="SECONDS",
                   help="close a kept-alive connection idle this long (default 15)")
    p.set_defaults(func=Handler("view_commands", "cmd_view"))


# In the order their commands appear in --help.
REGISTER = (register_ledger, register_intake, register_run, register_watch, register_demo, register_report,
            register_agreement, register_proof, register_view)
