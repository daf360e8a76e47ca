"""A CLI that forgives: options after the command, suggestions, help with examples, init twice, note targets."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

from evalledger import ledger
from evalledger.cli.main import build_parser

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "benchmarks" / "samples" / "pharmacology.benchmark.json"


def test_global_home_works_after_the_command(tmp_path, run_cli):
    home = tmp_path / "h"
    assert run_cli("init", "--home", home).returncode == 0
    status = run_cli("status", "--home", home)
    assert status.returncode == 0, status.stderr
    assert run_cli("status", "--home", tmp_path / "elsewhere").returncode == 2


def test_after_the_command_wins_over_before(tmp_path, run_cli):
    a, b = tmp_path / "a", tmp_path / "b"
    run_cli("init", home=a)
    run_cli("init", home=b)
    note = run_cli("--home", a, "note", "--new-stream", "case:x", "hello", "--home", b)
    assert note.returncode == 0, note.stderr
    assert ledger.open_ledger(b, readonly=True).head().seq == 1
    assert ledger.open_ledger(a, readonly=True).head().seq == 0


def test_mistyped_command_gets_a_suggestion(run_cli, tmp_path):
    done = run_cli("stauts", home=tmp_path)
    assert done.returncode == 2
    assert "unknown command 'stauts' (did you mean 'status'?)" in done.stderr


def test_mistyped_option_shows_the_help_of_its_command_with_a_suggestion(run_cli, tmp_path):
    done = run_cli("status", "--jsn", home=tmp_path)
    assert done.returncode == 2
    assert "usage: evalledger status" in done.stderr
    assert "unrecognized arguments: --jsn (did you mean '--json'?)" in done.stderr
    assert "COMMAND ..." not in done.stderr  # not the top-level usage


def test_mistyped_config_key_gets_a_suggestion(tmp_path, run_cli):
    home = tmp_path / "h"
    run_cli("init", home=home)
    done = run_cli("run", "--set", "deep_judgement_fuzzy_match_threshold=0.8", home=home)
    assert done.returncode == 2
    assert "did you mean 'deep_judgment_fuzzy_match_threshold'?" in done.stderr
    nested = run_cli("run", "--set", "audit.max_fact=3", home=home)
    assert nested.returncode == 2 and "did you mean 'max_facts'?" in nested.stderr


def test_every_command_help_has_a_description_and_an_example():
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    assert len(commands) >= 17
    for name, command in commands.items():
        text = command.format_help()
        assert command.description, name
        assert "example:\n  evalledger" in text, name
        assert f"evalledger {name}" in text.split("example:")[1] or name in text.split("example:")[1], name


def test_init_on_an_existing_home_says_so_and_changes_nothing(tmp_path, run_cli):
    home = tmp_path / "h"
    assert run_cli("init", home=home).stdout.startswith("initialised")
    run_cli("note", "--new-stream", "case:a", "kept", home=home)
    before = (home / "ledger.db").read_bytes()
    shutil.rmtree(home / "inbox")
    again = run_cli("init", home=home)
    assert again.returncode == 0
    assert "already exists as an evalledger home (head seq 1); nothing changed" in again.stdout
    assert (home / "inbox").is_dir() and (home / "ledger.db").read_bytes() == before


def test_note_takes_a_case_prefix_and_refuses_an_unknown_stream(tmp_path, run_cli):
    home = tmp_path / "h"
    run_cli("init", home=home)
    assert run_cli("ingest", SAMPLE, home=home).returncode == 0
    led = ledger.open_ledger(home, readonly=True)
    case_id = next(e.data["case_id"] for e in led.read(types=["case.opened"]))
    led.close()
    prefix = case_id[:10]
    done = run_cli("note", prefix, "parse looks wrong", "--author", "ana", home=home)
    assert done.returncode == 0, done.stderr
    assert f"note.added case:{case_id} " in done.stdout
    typo = run_cli("note", "case:zzzz-not-there", "lost", home=home)
    assert typo.returncode == 2 and "--new-stream" in typo.stderr
    other = run_cli("note", "benchmark:nope", "lost", home=home)
    assert other.returncode == 2 and "no stream 'benchmark:nope'" in other.stderr
    before = ledger.open_ledger(home, readonly=True).head().seq
    assert run_cli("note", "benchmark:nope", "kept", "--new-stream", home=home).returncode == 0
    assert ledger.open_ledger(home, readonly=True).head().seq == before + 1


def test_demo_runs_from_an_installed_wheel_outside_the_checkout(tmp_path):
    """pip install of the wheel, then ``evalledger demo`` from an unrelated folder (samples are packaged)."""
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                    "-w", str(wheels), str(REPO)], check=True, capture_output=True)
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    py = env_dir / "bin" / "python"
    [wheel] = wheels.glob("*.whl")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q", str(wheel)],
                   check=True, capture_output=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # The dependencies come from this environment's site-packages, through a folder of links that
    # leaves out evalledger itself (installed here editable or, in CI, as a regular package), so
    # that evalledger is imported only from the wheel.
    deps = tmp_path / "deps"
    deps.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.lower().startswith(("evalledger", "__editable__")) and entry.suffix != ".pth":
            (deps / entry.name).symlink_to(entry)
    env = {**os.environ, "PYTHONPATH": str(deps)}
    env.pop("EVALLEDGER_HOME", None)
    done = subprocess.run([str(py), "-m", "evalledger", "demo", "--dir", str(elsewhere)], cwd=elsewhere,
                          capture_output=True, text=True, timeout=300, env=env)
    where = subprocess.run([str(py), "-c", "import evalledger; print(evalledger.__file__)"], env=env,
                           capture_output=True, text=True).stdout
    assert where.startswith(str(env_dir)), where
    assert done.returncode == 0, done.stderr
    homes = list(elsewhere.glob("evalledger-demo-*"))
    assert len(homes) == 1 and len(list((homes[0] / "processed").iterdir())) == 4


def test_status_lines_carry_labels_and_hints_name_the_home(tmp_path, run_cli):
    home = tmp_path / "h"
    run_cli("init", home=home)
    run_cli("ingest", REPO / "benchmarks" / "samples" / "verifyfast-cases.audit.jsonl", home=home)
    status = run_cli("status", home=home)
    assert "kind: audit, file format: audit" in status.stdout
    missing = run_cli("status", home=tmp_path / "nohome")
    assert f"run 'evalledger --home {tmp_path / 'nohome'} init' first" in missing.stderr
