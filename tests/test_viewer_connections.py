"""The viewer's connections, seen from a raw socket against ``evalledger view`` in a subprocess:
idle kept-alive connections are closed, and bodies of refused requests are not read."""

from __future__ import annotations

import pytest

from viewer_support import (
    closed_within,
    failing_home,
    port_of,
    raw_connection,
    read_response,
    start_viewer,
    stop_viewer,
)


@pytest.fixture
def home(tmp_path):
    failing_home(tmp_path / "home", extra_cases=3)
    return tmp_path / "home"


def get(sock, port: int, path: str) -> tuple[int, dict[str, str], bytes]:
    """One kept-alive GET on ``sock`` and its response."""
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    return read_response(sock)


def test_an_idle_kept_alive_connection_is_closed_after_the_keepalive_timeout(home, run_cli):
    """aiohttp's default kept an idle connection open for an hour (3630 s): every idle client held
    a socket of the server that long. A live stream (/events) is not idle and stays open."""
    proc, url = start_viewer(home, "--keepalive-timeout", "1")
    try:
        port = port_of(url)
        with raw_connection(port) as sock:
            assert get(sock, port, "/static/view.css")[0] == 200
            status, headers, _ = get(sock, port, "/")            # the same connection, kept alive
            assert status == 200 and headers.get("connection", "").lower() != "close"
            waited = closed_within(sock, 10)
        assert waited is not None and 0.5 < waited < 5, waited
        with raw_connection(port) as silent:                      # a connection that never asks
            assert closed_within(silent, 10) is not None
        with raw_connection(port) as stream:
            stream.sendall(f"GET /events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
            data = b""
            while b"event: head" not in data:
                chunk = stream.recv(4096)
                assert chunk, data
                data += chunk
            assert closed_within(stream, 3) is None                # past the timeout: still streaming
    finally:
        stop_viewer(proc)
    assert "idle this long (default 15)" in " ".join(run_cli("view", "--help").stdout.split())
    for bad in ("0", "-1", "nan", "inf"):
        refused = run_cli("view", "--port", "0", "--keepalive-timeout", bad, home=home)
        assert refused.returncode == 2 and f"--keepalive-timeout {float(bad)}" in refused.stderr, refused.stderr


def announce_huge_body(sock, port: int, method: str, path: str, extra: str = "") -> None:
    """Send a write's head announcing 50 MB of form body, then only its first bytes."""
    sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{extra}"
                 "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 52428800\r\n\r\n"
                 "token=abc&verdict=pass&".encode())


def test_a_refused_write_is_answered_without_reading_its_body(home):
    """A read-only viewer read the whole form (a client may announce 50 MB and send it slowly, or
    never) before it answered 405: the answer waited on the body. It comes at once now, for every
    method, and so does review mode's 403 to another site's Origin."""
    import time
    proc, url = start_viewer(home)
    try:
        port = port_of(url)
        for method, path in (("POST", "/case/x1/override"), ("POST", "/case/x1/note"), ("PUT", "/case/x1/note"),
                             ("DELETE", "/")):
            with raw_connection(port, timeout=10) as sock:
                start = time.monotonic()
                announce_huge_body(sock, port, method, path)
                status, headers, body = read_response(sock)
                assert status == 405 and time.monotonic() - start < 5, (method, path, status)
                if method == "POST":
                    assert b"read-only" in body and headers.get("connection", "").lower() == "close"
    finally:
        stop_viewer(proc)
    proc, url = start_viewer(home, "--review")
    try:
        port = port_of(url)
        with raw_connection(port, timeout=5) as sock:
            announce_huge_body(sock, port, "POST", "/case/x1/note", "Origin: http://evil.example\r\n")
            status, _, body = read_response(sock)
        assert status == 403 and b"cross-site" in body
    finally:
        stop_viewer(proc)


def status_for_host(port: int, host: str) -> int:
    """The status of GET / on the viewer bound to 127.0.0.2:``port`` for a request naming ``host``."""
    with raw_connection(port, address="127.0.0.2") as sock:
        sock.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        return read_response(sock)[0]


def test_allow_host_keeps_the_host_check_on_for_another_address(home, run_cli):
    """With --host other than a loopback name the Host check was off entirely: a page that rebinds
    its DNS name to the machine could read the ledger. --allow-host NAME keeps it on: the names
    given, the loopback names and the bound address are answered, any other name refused."""
    proc, url = start_viewer(home, "--host", "127.0.0.2", "--allow-host", "viewer.test", "--allow-host", "Other.Test")
    try:
        port = port_of(url)
        assert url.startswith(f"http://viewer.test:{port}/")
        statuses = {host: status_for_host(port, f"{host}:{port}")
                    for host in ("viewer.test", "OTHER.test", "127.0.0.2", "localhost", "evil.test", "viewer.test.evil")}
        assert status_for_host(port, "viewer.test") == 403                # not the port it listens on
    finally:
        stop_viewer(proc)
    warning = proc.stderr.read()
    assert statuses == {"viewer.test": 200, "OTHER.test": 200, "127.0.0.2": 200, "localhost": 200,
                        "evil.test": 403, "viewer.test.evil": 403}
    assert "Host names answered: Other.Test, viewer.test" in warning
    proc, url = start_viewer(home, "--host", "127.0.0.2")                  # without it: off, as documented
    try:
        assert status_for_host(port_of(url), f"evil.test:{port_of(url)}") == 200
    finally:
        stop_viewer(proc)
    for bad in ("viewer.test:8080", "http://viewer.test", "viewer.test/x", ""):
        refused = run_cli("view", "--port", "0", "--host", "127.0.0.2", "--allow-host", bad, home=home)
        assert refused.returncode == 2 and f"--allow-host {bad}: not a host name" in refused.stderr, refused.stderr


def test_host_values_bracket_addresses_and_take_a_bare_name_on_port_80():
    from evalledger.cli.viewer.server import host_values
    assert host_values("0.0.0.0", 8765, []) == set()
    assert host_values("::", 80, ["fe80::1", "Viewer.LAN"]) >= {"[fe80::1]:80", "[fe80::1]", "viewer.lan", "[::]:80",
                                                                 "localhost", "127.0.0.1:80", "[::1]:80"}
    assert host_values("127.0.0.1", 8765, []) == {"127.0.0.1:8765", "localhost:8765", "[::1]:8765"}
