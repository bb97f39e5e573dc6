"""An epgm:// endpoint on a libzmq without OpenPGM fails with a message that names the fallback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import zmq

from feedha import transport
from feedha.transport import TransportConfigError

ROOT = Path(__file__).resolve().parents[2]
LINE = "epgm://127.0.0.1;239.192.1.1:7101"


def test_configure_socket_without_pgm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zmq, "has", lambda feature: False)
    context = zmq.Context()
    socket = context.socket(zmq.PUB)
    try:
        with pytest.raises(TransportConfigError, match="tcp:// line"):
            transport.configure_socket(socket, LINE)
        transport.configure_socket(socket, "tcp://127.0.0.1:5601")  # nothing to set
    finally:
        socket.close(linger=0)
        context.term()


def test_adapter_exits_with_a_clear_message_without_pgm() -> None:
    # The adapter's CLI in a child process whose zmq reports no OpenPGM.
    code = (
        "import sys, zmq\n"
        "zmq.has = lambda feature: False\n"
        "from adapter.__main__ import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    argv = ["--channel", "EQ", "--channel-number", "1", "--adapter", "1", "--source", "tcp://127.0.0.1:1"]
    argv += ["--source-stream", "A-M", "--source-stream-number", "1", "--line", LINE]
    argv += ["--sync", "tcp://127.0.0.1:0", "--insecure"]  # a multicast line without keys, on purpose
    result = subprocess.run(
        [sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"feedha adapter: {LINE!r} needs a libzmq with OpenPGM, and this pyzmq's has none: "
        "run scripts/setup (it builds pyzmq against Debian's libzmq) or use a tcp:// line"
    )
    assert "Traceback" not in result.stderr
