"""Homes and a running viewer for the viewer tests: the demo home, a synthetic home with failed
quotes and overrides, a hostile (XSS) home, and ``evalledger view`` as a real subprocess."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from evalledger import ledger
from evalledger.testing import synthetic as syn

XSS = ['<script>alert("x1")</script>', '"><img src=x onerror=alert("x2")>', "javascript:alert('x3')",
       "<a href=\"javascript:alert('x4')\">click</a>", "</pre><svg onload=alert('x5')>", "{{7*7}}&amp;"]


def demo_home(tmp: Path) -> Path:
    """A judged demo home (``evalledger demo``), made by the CLI in a subprocess."""
    from conftest import cli
    done = cli("demo", "--dir", tmp, timeout=240)
    assert done.returncode == 0, done.stderr
    [home] = [p for p in tmp.iterdir() if p.name.startswith("evalledger-demo-")]
    return home


def failing_home(path: Path, extra_cases: int = 0) -> dict:
    """A home of synthetic template cases: one with a failed quote and an auto-fail, one passed and
    overridden to fail, one whose stage failed, then ``extra_cases`` plain ones. Returns their ids."""
    home = ledger.init_home(path)
    ids = {}
    with ledger.open_ledger(home) as led:
        led.append([syn.benchmark("b1", "template", name="pharma", questions=3)])
        response = "The drug was approved in 2001 by the FDA after a fast-track review."
        cid, first = syn.opened("b1", "template", "q1", "model-x", {"id": "q1", "question": "When was it approved?",
                                "template": {"fields": [{"name": "year", "ground_truth": 2001}]}},
                                response=response)
        led.append([first, syn.judge_call(cid, "extract_excerpts"),
                    syn.excerpt_retried(cid, "year", 1, [{"text": "approved in 1999 by the EMA", "similarity": 0.41}]),
                    syn.excerpt(cid, "year", "approved in 2001 by the FDA", 0.97, attempt=2),
                    syn.field(cid, "year", False, extracted=1999, expected=2001),
                    syn.auto_failed(cid, ["excerpt for 'year' below threshold"]),
                    syn.judged(cid, "fail", auto_failed=True, reasons=["field year failed"])])
        ids["failed_quote"] = cid
        cid, events = syn.template_case("b1", "q2", "model-x", "pass", {"dose": True})
        led.append(events + [syn.overridden(cid, "fail", "dose unit wrong", "ana")])
        ids["overridden"] = cid
        cid, first = syn.opened("b1", "template", "q3", "model-y", {"id": "q3", "question": "Which class?"},
                                response="a statin")
        led.append([first, syn.stage_failed(cid, "template", "judge unreachable after 3 attempts")])
        ids["stage_failed"] = cid
        for i in range(extra_cases):
            cid, events = syn.template_case("b1", f"x{i:05d}", "model-x" if i % 2 else "model-y",
                                            "pass" if i % 3 else "fail", {"f": bool(i % 3)}, calls=1)
            led.append(events)
    return ids


def xss_home(path: Path) -> list[str]:
    """A home whose benchmark name, models, questions, responses, ids and judge replies are hostile."""
    home = ledger.init_home(path)
    ids = []
    with ledger.open_ledger(home) as led:
        led.append([syn.benchmark("bx", "template", name=XSS[0] + XSS[2], questions=len(XSS))])
        for i, payload in enumerate(XSS):
            cid, first = syn.opened("bx", "template", payload, XSS[(i + 1) % len(XSS)],
                                    {"id": payload, "question": payload + " " + XSS[(i + 2) % len(XSS)],
                                     "template": {"fields": [{"name": payload, "ground_truth": XSS[1]}]}},
                                    response=f"{payload} and {XSS[(i + 3) % len(XSS)]}")
            call = syn.judge_call(cid, "parse")
            call.data["reply"] = {"values": {payload: XSS[4]}}
            led.append([first, call, syn.excerpt(cid, payload, payload, 1.0),
                        syn.excerpt_retried(cid, payload, 1, [{"text": XSS[3], "similarity": 0.2}]),
                        syn.field(cid, payload, False, extracted=XSS[1], expected=XSS[0]),
                        syn.judged(cid, "fail", reasons=[XSS[4]]),
                        ledger.NewEvent(f"case:{cid}", "note.added", {"text": XSS[3], "author": XSS[0]})])
            ids.append(cid)
    return ids


def start_viewer(home: Path, *args: str, timeout: float = 60) -> tuple[subprocess.Popen, str]:
    """``evalledger view --port 0`` in a subprocess; returns it and the URL it printed."""
    proc = subprocess.Popen([sys.executable, "-m", "evalledger", "--home", str(home), "view", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    deadline = time.monotonic() + timeout
    line = ""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        found = re.search(r"(http://\S+)", line)
        if found:
            return proc, found.group(1)
        if proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"viewer did not start: {line} {proc.stderr.read()}")


def stop_viewer(proc: subprocess.Popen) -> None:
    """Stop a viewer started by ``start_viewer`` (SIGINT, as Ctrl-C), killing it if it hangs."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# Six audit lines; each case takes three judge calls (decompose, check facts, check logic).
AUDIT_LINES = [{"id": i, "tag": "clean" if i % 2 else "major_factual", "difficulty": "easy", "description": f"line {i}",
                "context_input": f"Revenue rose {i}% to $5.6 billion in 2023.",
                "model_output": f"Revenue rose {i}% in 2023." if i % 2 else f"Revenue fell {i}% in 2023, so it shrank.",
                "expected_credit_score": 5 if i % 2 else 2} for i in range(1, 7)]
PRICES = "[prices.judge-1]\ninput_per_million = 1000.0\noutput_per_million = 1000.0\n"


_COSTED: list[Path] = []        # built once per test session (four CLI processes): tests only read it


def costed_home(tmp: Path, run_cli) -> Path:
    """A home judged by two real runs against a stand-in OpenAI server that reports usage tokens:
    the first without a price for its model (capped at 7 calls: its cost is unknown), the second
    with one (it finishes the cases: its cost is known). Built in ``tmp`` by the first caller."""
    if _COSTED and _COSTED[0].exists():
        return _COSTED[0]
    from evalledger.testing.stand_in import StandIn, StandInThread
    from profiles_support import scripted_judge, write
    home = ledger.init_home(tmp / "home")
    assert run_cli("ingest", write(tmp / "lines.audit.jsonl", AUDIT_LINES), home=home).returncode == 0
    write(tmp / "prices.toml", PRICES)
    with StandInThread(StandIn(reply_fn=scripted_judge())) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_MODEL": "judge-1"}
        unpriced = run_cli("run", "--quiet", "--judge", "openai", "--max-calls", "7", home=home, env=env)
        priced = run_cli("run", "--quiet", "--judge", "openai", "--config", tmp / "prices.toml", home=home, env=env)
    assert unpriced.returncode == 0 and priced.returncode == 0, unpriced.stderr + priced.stderr
    _COSTED[:] = [home]
    return home


def usage_by_run(home: Path) -> dict[str, dict]:
    """Run id -> calls, total tokens and cost (None when a call had no price) of its judge.called
    events, summed straight from the ledger: what the viewer's per-run figures must equal."""
    out: dict[str, dict] = {}
    with ledger.open_ledger(home, readonly=True) as led:
        for event in led.read(types=["judge.called"]):
            sums = out.setdefault(event.meta["run"], {"calls": 0, "tokens": 0, "costs": []})
            sums["calls"] += 1
            sums["tokens"] += event.data["usage"]["total_tokens"]
            sums["costs"].append(event.data.get("cost_usd"))
    for sums in out.values():
        costs = sums.pop("costs")
        sums["cost"] = None if None in costs else round(sum(costs), 6)
    return out


def seq_of(head: str) -> int:
    """The seq of a ``head`` event's data (``seq hash``)."""
    return int(head.split()[0])


async def next_event(response) -> str:
    """The data of the next server-sent event on an open ``/events`` response."""
    data = None
    while True:
        line = (await response.content.readline()).decode().strip()
        if line.startswith("data:"):
            data = line[5:].strip()
        elif not line and data is not None:
            return data


def damage_leaving_wal(home: Path) -> None:
    """Cut ``home``'s ledger.db short, as a bad copy or a full disk does, with the write-ahead log
    of its last append left beside it (a writer killed before it checkpointed): the log still
    holds page 1, so the file opens, and its other pages are gone."""
    with ledger.open_ledger(home) as led:
        _, events = syn.template_case("b1", "late", "model-x", "pass", {"f": True})
        led.append(events)
        wal = (home / "ledger.db-wal").read_bytes()       # the last close checkpoints and removes it
    with open(home / "ledger.db", "r+b") as fh:
        fh.truncate(3 * 4096)
    (home / "ledger.db-wal").write_bytes(wal)


def port_of(url: str) -> int:
    """The port of a viewer URL ``start_viewer`` returned."""
    return int(re.search(r"://[^/]*:(\d+)/", url).group(1))


def raw_connection(port: int, timeout: float = 10, address: str = "127.0.0.1") -> socket.socket:
    """A plain TCP connection to a viewer on ``address``: requests are written by hand, so what the
    server does with the connection (keeps it, closes it, reads a body or not) can be seen."""
    return socket.create_connection((address, port), timeout=timeout)


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response read off ``sock``: status, headers (lower-case names), body (by its
    Content-Length). Fails when the server closes the connection first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the server closed the connection before a whole response: {data[:200]!r}"
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection inside a body"
        body += chunk
    return int(status_line.split()[1]), headers, body


def closed_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the server closes ``sock`` (sending nothing more), or None if it is still
    open after ``seconds``."""
    start = time.monotonic()
    sock.settimeout(seconds)
    try:
        extra = sock.recv(1)
    except TimeoutError:
        return None
    except ConnectionResetError:
        extra = b""
    assert extra == b"", f"the server sent more: {extra!r}"
    return time.monotonic() - start
