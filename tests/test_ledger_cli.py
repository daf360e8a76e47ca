"""The ledger commands of ``evalledger`` as a user runs them: init, note, log, verify, export, import."""

from __future__ import annotations

import re

import orjson

from evalledger import ledger
from evalledger.cli.main import main


def test_init_note_log_verify_as_subprocesses(tmp_path, run_cli):
    home = tmp_path / "home"
    assert run_cli("init", home=home).returncode == 0
    assert all((home / name).is_dir() for name in ("inbox", "processed", "rejected", "reports"))
    first = run_cli("note", "--new-stream", "case:q1", "looks odd", "--author", "ana", home=home)
    assert first.returncode == 0 and first.stdout.startswith("seq 1 note.added case:q1 ")
    run_cli("note", "--new-stream", "benchmark:b1", "second", home=home)
    log = run_cli("log", home=home)
    assert log.returncode == 0
    assert [line.split()[0] for line in log.stdout.splitlines()] == ["1", "2"]
    assert '"author":"ana"' in log.stdout and "note.added" in log.stdout
    verify = run_cli("verify", home=home)
    head = ledger.open_ledger(home, readonly=True).head()
    assert verify.returncode == 0 and verify.stdout.strip() == f"head 2:{head.hash}"


def test_log_filters_and_json_lines(home, capsys):
    with ledger.open_ledger(home) as led:
        led.append([ledger.NewEvent("case:a", "note.added", {"text": "1"}),
                    ledger.NewEvent("case:b", "note.added", {"text": "2"}),
                    ledger.NewEvent("case:a", "note.added", {"text": "3"})])
    assert main(["--home", str(home), "log", "--json"]) == 0
    assert capsys.readouterr().out.encode() == (home / "events.jsonl").read_bytes()
    main(["--home", str(home), "log", "--json", "--stream", "case:a", "--from", "2"])
    assert [orjson.loads(l)["seq"] for l in capsys.readouterr().out.splitlines()] == [3]
    main(["--home", str(home), "log", "--type", "note.added", "--type", "run.started"])
    assert len(capsys.readouterr().out.splitlines()) == 3


def test_home_from_the_environment_and_the_default(tmp_path, run_cli):
    env_home = tmp_path / "from-env"
    assert run_cli("init", env={"EVALLEDGER_HOME": str(env_home)}).returncode == 0
    assert ledger.is_home(env_home)
    assert run_cli("init", cwd=tmp_path, env={"EVALLEDGER_HOME": ""}).returncode == 0
    assert ledger.is_home(tmp_path / "evalledger")


def test_commands_refuse_a_missing_home(tmp_path, run_cli):
    for args in (["note", "--new-stream", "case:a", "x"], ["log"], ["verify"], ["export"]):
        result = run_cli(*args, home=tmp_path / "nowhere")
        assert result.returncode == 2 and "no evalledger home" in result.stderr, args
    assert not (tmp_path / "nowhere").exists()
    assert run_cli(home=tmp_path).returncode == 2  # no command: usage


def test_export_then_import_into_a_new_home_and_a_jsonl_file(home, tmp_path, run_cli):
    with ledger.open_ledger(home) as led:
        led.append([ledger.NewEvent("case:a", "note.added", {"text": t}) for t in ("ä", "b", "c")])
    exported = run_cli("export", home=home)
    assert exported.returncode == 0 and exported.stdout.encode() == (home / "events.jsonl").read_bytes()
    assert run_cli("export", "--out", tmp_path / "out.jsonl", home=home).returncode == 0
    for target in (tmp_path / "copy", tmp_path / "copy.jsonl"):
        result = run_cli("import", tmp_path / "out.jsonl", home=target)
        assert result.returncode == 0 and result.stdout.startswith("imported 3 events; seq 3 ")
        again = run_cli("export", home=target)
        assert again.stdout.encode() == (home / "events.jsonl").read_bytes()
    refused = run_cli("import", tmp_path / "out.jsonl", home=tmp_path / "copy")
    assert refused.returncode == 2 and "empty" in refused.stderr


def test_import_refuses_a_damaged_file_and_keeps_nothing(home, tmp_path, run_cli):
    with ledger.open_ledger(home) as led:
        led.append([ledger.NewEvent("case:a", "note.added", {"text": t}) for t in ("1", "2", "3")])
    lines = (home / "events.jsonl").read_bytes().splitlines(keepends=True)
    cases = {
        "edited.jsonl": (lines[:1] + [lines[1].replace(b'"2"', b'"9"')] + lines[2:],
                         r"line 2 \(seq 2\): hash does not match"),
        "reformatted.jsonl": ([lines[0].replace(b',"id":', b', "id":')] + lines[1:],
                              r"line 1 \(seq 1\): .*canonical"),
        "duplicated.jsonl": (lines[:2] + lines[1:], r"line 3 \(seq 3\): holds seq 2"),
        "cut.jsonl": ([lines[0], lines[1][:30]], r"line 2 \(seq 2\): the file ends in the middle of a line"),
        "garbage.jsonl": ([b"not json\n"], r"line 1 \(seq 1\): not an event envelope"),
    }
    for name, (content, reason) in cases.items():
        (tmp_path / name).write_bytes(b"".join(content))
        for target in (tmp_path / f"h-{name}", tmp_path / f"t-{name}"):
            result = run_cli("import", tmp_path / name, home=target)
            assert result.returncode == 1, (name, result.stderr)
            assert re.search(reason, result.stderr) and "nothing was imported" in result.stderr, result.stderr
            assert ledger.open_ledger(target, readonly=True).head().seq == 0
    missing = run_cli("import", tmp_path / "missing.jsonl", home=tmp_path / "h-missing")
    assert missing.returncode == 2 and "no such file" in missing.stderr
