"""The warm engine's client side without an engine: which commands it sends, where it looks for an
engine, the framing, and the engine's stand-in streams (what click and rich see)."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import click
import pytest

from framework.engine import client, streams, wire


def test_group_options_and_the_subcommand_are_found_before_the_command_s_own() -> None:
    assert client.split_globals(["--project", "p", "--target", "prod", "build", "--project-x"]) == ({"--project": "p", "--target": "prod"}, "build")
    assert client.split_globals(["--project=p", "-q", "sql", "select 1"]) == ({"--project": "p"}, "sql")
    assert client.split_globals(["--version"]) == ({}, None)


@pytest.mark.parametrize(("argv", "env", "served"), [
    (["build", "dws.x"], {}, True),
    (["--project", "p", "sql", "select 1"], {}, True),
    (["ingest", "--continuous"], {}, False),  # runs until stopped
    (["init", "new"], {}, False),
    (["demo", "--events", "40"], {}, True),  # the simulator: no services
    (["demo", "--kafka"], {}, False),  # starts a broker
    (["demo", "--source", "mariadb"], {}, False),
    (["demo", "--source=postgres"], {}, False),
    (["demo", "--source", "simulator"], {}, True),
    (["schedule"], {}, False),
    (["engine", "start"], {}, False),
    (["ingest", "--once"], {"LAKE_FAILPOINT": "after_table_commit"}, False),  # kills its own process
    (["--help"], {}, False),
])
def test_which_commands_an_engine_runs(argv: list[str], env: dict[str, str], served: bool) -> None:
    assert client.servable(argv, env) is served


def test_the_engine_file_is_the_project_s_unless_lake_engine_names_one(tmp_path: Path) -> None:
    assert client.engine_file(["--project", "p", "build"], {}, tmp_path) == tmp_path / "p" / ".lake" / "engine.json"
    assert client.engine_file(["build"], {}, tmp_path) == tmp_path / ".lake" / "engine.json"
    assert client.engine_file(["build"], {"LAKE_ENGINE": "/x/e.json"}, tmp_path) == Path("/x/e.json")
    assert client.engine_file(["build"], {"LAKE_ENGINE": "off"}, tmp_path) is None


def test_without_a_running_engine_the_command_runs_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LAKE_ENGINE", raising=False)
    assert client.run(["build"]) is None  # no engine file
    (tmp_path / ".lake").mkdir()
    (tmp_path / ".lake" / "engine.json").write_text("{not json")
    assert client.run(["build"]) is None  # a damaged file
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    (tmp_path / ".lake" / "engine.json").write_text(json.dumps({"pid": 1, "port": port, "token": "t"}))
    assert client.run(["build"]) is None  # a dead engine's file: its port refuses


def test_frames_round_trip_and_a_closed_peer_is_a_wire_error() -> None:
    a, b = socket.socketpair()
    with a, b:
        wire.send_json(a, b"R", {"argv": ["sql", "select 'é'"]})
        wire.send(a, b"o", b"x" * 100_000)
        assert wire.receive(b) == (b"R", json.dumps({"argv": ["sql", "select 'é'"]}).encode())
        assert wire.receive(b) == (b"o", b"x" * 100_000)
        a.close()
        with pytest.raises(wire.WireError):
            wire.receive(b)


def test_the_engine_s_streams_carry_text_to_the_client_and_are_text_streams_to_click() -> None:
    a, b = socket.socketpair()
    out = streams.ClientStream(b"e", "stderr", sys.__stderr__)  # type: ignore[arg-type]
    with a, b:
        streams.CLIENT.sock, streams.CLIENT.tty = a, {"stdout": False, "stderr": True}
        try:
            assert out.isatty()
            with pytest.raises(TypeError):
                out.write(b"bytes")  # type: ignore[arg-type]
            click.echo("Error: no such table", file=out)
            out.buffer.write("ü".encode())
            out.flush()
        finally:
            streams.CLIENT.sock = None
        received = b""
        b.settimeout(5)
        while not received.endswith("ü".encode()):
            kind, data = wire.receive(b)
            assert kind == b"e"
            received += data
        assert received == "Error: no such table\nü".encode()
    assert not out.isatty()  # between commands: the engine's own log


def test_ctrl_c_before_the_command_takes_over_is_interrupted_not_a_stack_trace(monkeypatch: pytest.MonkeyPatch,
                                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C while the client reaches an engine (before its relay or the command's own handling)
    ends as any interrupted command does: "interrupted", exit code 130."""
    from framework.cli import entry

    def pressed(argv: list[str]) -> int | None:
        raise KeyboardInterrupt

    monkeypatch.setattr(client, "run", pressed)
    monkeypatch.setattr(sys, "argv", ["lake", "build"])
    with pytest.raises(SystemExit) as done:
        entry.main()
    assert done.value.code == 130
    err = capsys.readouterr().err
    assert err == "interrupted\n"
