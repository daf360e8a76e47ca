"""QA: a path that cannot be used is a one-line usage error naming it, never a traceback."""

from __future__ import annotations


def test_export_into_a_missing_folder_or_onto_a_folder(home, tmp_path, run_cli):
    missing = run_cli("export", "--out", tmp_path / "no" / "such" / "out.jsonl", home=home)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "out.jsonl: No such file or directory" in missing.stderr
    folder = run_cli("export", "--out", tmp_path, home=home)
    assert folder.returncode == 2 and f"{tmp_path}: Is a directory" in folder.stderr


def test_init_on_a_file_or_under_a_file(tmp_path, run_cli):
    plain = tmp_path / "results.json"
    plain.write_text("{}")
    on_file = run_cli("init", home=plain)
    assert on_file.returncode == 2 and "is a file, not a home directory" in on_file.stderr
    assert plain.read_text() == "{}"
    under = run_cli("init", home=plain / "home")
    assert under.returncode == 2 and "Traceback" not in under.stderr and "Not a directory" in under.stderr


def test_replay_into_an_existing_file(home, tmp_path, run_cli):
    plain = tmp_path / "results.json"
    plain.write_text("{}")
    done = run_cli("replay", "--into", plain, home=home)
    assert done.returncode == 2 and "Traceback" not in done.stderr and str(plain) in done.stderr


def test_watch_on_a_ledger_file_says_it_needs_a_home_folder(tmp_path, run_cli):
    store = tmp_path / "ledger.jsonl"
    assert run_cli("init", home=store).returncode == 0
    done = run_cli("watch", "--once", home=store)
    assert done.returncode == 2 and "watch needs a home folder" in done.stderr


def test_source_out_writes_the_file_whole_or_names_the_path_it_cannot_write(home, tmp_path, run_cli):
    # source --out wrote straight into the file (a kill midway left part of it); it goes through a
    # hidden temporary file beside it now, renamed into place, and leaves nothing else behind
    from watch_support import benchmark_file
    bench = tmp_path / "bench.json"
    bench.write_bytes(benchmark_file(1, questions=1))
    assert run_cli("ingest", bench, home=home).returncode == 0
    from evalledger import ledger
    with ledger.open_ledger(home, readonly=True) as led:
        case_id = next(iter(led.read(types=["case.opened"]))).data["case_id"]
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "copy.json"
    out.write_bytes(b"older")
    assert run_cli("source", case_id, "--out", out, home=home).returncode == 0
    assert out.read_bytes() == bench.read_bytes()
    assert [p.name for p in out_dir.iterdir()] == ["copy.json"]
    folder = run_cli("source", case_id, "--out", out_dir, home=home)
    assert folder.returncode == 2 and f"--out {out_dir}: is a folder" in folder.stderr
    missing = run_cli("source", case_id, "--out", tmp_path / "no" / "copy.json", home=home)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert f"--out {tmp_path / 'no' / 'copy.json'}: cannot write (No such file or directory)" in missing.stderr
