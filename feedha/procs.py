"""Child processes that speak JSON lines: start, watch their events, stop.

The demo, the drills and the integration tests start every component as a
real process. Each prints JSON events on stdout; :class:`JsonProcess` reads
them on a thread so the caller can wait for an event with a deadline instead
of sleeping.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

Event = dict[str, Any]


# The feed source is a simulator here: on a shared machine it runs at a lower
# CPU priority so a Spark micro-batch cannot starve the adapters' heartbeats.
SOURCE_NICE = 10


def python_argv(module: str, args: Sequence[str], *, nice: int = 0) -> list[str]:
    """The command line of ``python -m module args``, under ``nice -n`` when asked."""
    argv = [sys.executable, "-m", module, *args]
    return ["nice", "-n", str(nice), *argv] if nice > 0 else argv


class ProcessError(RuntimeError):
    """A child process did not do what was expected in time."""


class JsonProcess:
    """A child process whose stdout carries JSON events, one per line.

    Args:
        name: a short label for messages.
        argv: the command; ``python`` modules are run with the current interpreter.
        log: where the child's stderr goes (a file), default inherited.
        env: extra environment variables for the child (secrets, say).
        cwd: the child's working directory (default: this process's).
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        log: IO[str] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        self.name = name
        self.events: list[Event] = []
        self.text: list[str] = []
        self._cond = threading.Condition()
        env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
        self.popen = subprocess.Popen(
            list(argv),
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=log if log is not None else None,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        self._reader = threading.Thread(target=self._read, name=f"{name}-stdout", daemon=True)
        self._reader.start()

    def __repr__(self) -> str:
        rc = self.popen.poll()
        return f"<JsonProcess [{self.name}, pid={self.popen.pid}, rc={rc}, events={len(self.events)}]>"

    @classmethod
    def python(
        cls, name: str, module: str, args: Sequence[str], *, nice: int = 0, **kwargs: Any
    ) -> JsonProcess:
        """Start ``python -m module args`` (with ``nice`` > 0: at a lower CPU priority)."""
        return cls(name, python_argv(module, args, nice=nice), **kwargs)

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                event = None
            with self._cond:
                if isinstance(event, dict):
                    self.events.append(event)
                else:
                    self.text.append(line)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[Event], bool], timeout: float) -> Event:
        """Return the first event (past or future) satisfying ``predicate``.

        Raises:
            ProcessError: the timeout passed or the process ended first.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for event in self.events:
                    if predicate(event):
                        return event
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ProcessError(f"{self.name}: no matching event within {timeout:.1f}s")
                if self.popen.poll() is not None and not self._reader.is_alive():
                    raise ProcessError(f"{self.name} exited with {self.popen.returncode} before the event")
                self._cond.wait(min(remaining, 0.1))

    def wait_event(self, name: str, timeout: float) -> Event:
        """Wait for an event whose ``event`` field is ``name``."""
        return self.wait_for(lambda e: e.get("event") == name, timeout)

    def last(self, name: str) -> Event | None:
        """The newest event named ``name`` so far."""
        with self._cond:
            for event in reversed(self.events):
                if event.get("event") == name:
                    return event
        return None

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(timeout=10)
        self._close()

    def _close(self) -> None:
        self._reader.join(timeout=5)
        if self.popen.stdout is not None and not self._reader.is_alive():
            self.popen.stdout.close()

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, wait, then SIGKILL if it does not go; returns the exit code."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=10)
        self._close()
        return self.popen.returncode

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None
