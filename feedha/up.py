"""``feedha up``: a local cluster to develop against, secure by default, in the foreground until Ctrl-C.

Starts, as separate processes on loopback: the stream administration server,
the feed source (the plain source by default, or the Spark job), and
``--channels N`` adapter groups (an active and two backups each, journals
and replay services on). Every adapter serves its line and replay service
with CURVE and admits only the subscriber keys the admin server grants; each
group's sync bus has its own key; the source link is CURVE too (the source
admits the adapters' keys, the adapters verify the source's). The adapters'
control sockets are ``ipc://`` sockets in a directory only the user can
enter (nobody else on the machine can purge or promote). Every adapter also serves a delayed line
(``--delay`` seconds behind, 15 minutes by default) from its journal, and a
conflated line (``--conflate-interval``, 1 s by default). Five
users are created, each with a key file (JSON: admin address, key id,
secret; mode 0600): ``subscriber`` (real-time, every symbol), ``delayed``
(delayed-only), ``mixed`` (real-time for symbols A-M, delayed for the rest),
``conflated`` (conflated-only) and ``operator`` (feedctl, and the status page).
Every daemon serves Prometheus metrics, ``/healthz`` and ``/readyz`` on a
loopback port, and its probes again on a listener of their own (``health``).
Once the admin server has every adapter registered (a subscription made after
it gets every line), one JSON line tells where everything is::

    {"admin": "127.0.0.1:PORT", "status_page": "http://127.0.0.1:PORT/login?token=...",
     "metrics": ["http://127.0.0.1:PORT/metrics", ...], "health": ["http://127.0.0.1:PORT", ...],
     "users": {"subscriber": FILE, "delayed": FILE, "mixed": FILE, "conflated": FILE,
               "operator": FILE},
     "channels": [{"name": ..., "number": ..., "lines": [...], "delayed_lines": [...],
                   "conflated_lines": [...], "replay": [...]}], "dir": DIR}

``status_page`` logs a browser in as the operator once, within 10 minutes
(as Jupyter's link does); ``feedha admin-server login-link operator --config
DIR/admin-server.yaml`` makes another.

SIGINT or SIGTERM stops everything (adapters first, gracefully) and exits 0.
Try it: ``feedha subscribe --key-file FILE --channel NAME --count 10``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import shutil
import signal
import string
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, Final

import grpc

from feedha.adapter.zap import write_keys
from feedha.admin_client.channel import login, open_channel
from feedha.admin_server.config import SecretHashing
from feedha.admin_server.server import issue_key
from feedha.admin_server.status_page import new_login_link
from feedha.admin_server.store import Store
from feedha.cluster import GroupPlan, plan_group, start_adapter, start_source
from feedha.ports import free_ports
from feedha.procs import JsonProcess, ProcessError
from feedha.proto import admin_pb2, admin_pb2_grpc

REGISTER_S = 60.0  # how long the adapters may take to register with the admin server

POLICY = """\
version: 1
groups:
  operators: {roles: [admin]}
  feed: {roles: [adapter]}
  traders: {}
  delayed: {}
  mixed: {}
  conflated: {}
rules:
  - groups: [traders]
    symbols: ["*"]
    mode: realtime
  - groups: [delayed, mixed]
    symbols: ["*"]
    mode: delayed
  - groups: [mixed]
    symbols: ["[A-M]*"]
    mode: realtime
  - groups: [conflated]
    symbols: ["*"]
    mode: conflated
"""
# The admin server's argon2id cost: cheap for a development cluster, or the production default.
_HASHING = {
    "fast": SecretHashing(time_cost=1, memory_kib=8192, parallelism=1),
    "default": SecretHashing(),
}
# The users and their key files: name, groups, roles (the adapters' own user, "feed", comes last).
USERS: Final = (
    ("subscriber", ("traders",), ()),
    ("delayed", ("delayed",), ()),
    ("mixed", ("mixed",), ()),
    ("conflated", ("conflated",), ()),
    ("operator", (), ("admin",)),
)
ADAPTERS_USER: Final = ("feed", ("feed",), ("adapter",))


def channel_letters(count: int) -> list[tuple[str, str]]:
    """``count`` channels over A-Z: (name, letter range), e.g. ``[("EQ-A-M", "A-M"), ("EQ-N-Z", "N-Z")]``."""
    letters = string.ascii_uppercase
    size = -(-len(letters) // count)
    spans = [letters[i : i + size] for i in range(0, len(letters), size)]
    return [(f"EQ-{span[0]}-{span[-1]}", f"{span[0]}-{span[-1]}") for span in spans]


class Cluster:
    """The processes of ``feedha up`` and what they were given."""

    def __init__(self, args: argparse.Namespace, workdir: Path, log: IO[str]) -> None:
        self.args, self.workdir, self.log = args, workdir, log
        self.procs: list[JsonProcess] = []
        self.adapters: list[JsonProcess] = []
        self.groups: list[GroupPlan] = []
        self.admin = ""
        self.http = ""  # the admin server's HTTP listener (metrics, status page)
        self.status_page = ""
        self.key_files: dict[str, str] = {}
        self.source: JsonProcess | None = None
        self.keys = workdir / "keys"
        self.admin_health = ""
        self._config = workdir / "admin-server.yaml"
        self._database = workdir / "admin.sqlite"  # the config's ``database``, next to it
        self._hashing = _HASHING[getattr(args, "secret_hashing", "fast")]

    def start_admin(self) -> None:
        port = free_ports(1)[0]
        channels = "\n".join(
            f"      - {{name: {name}, number: {n}, source_stream: {letters}, letters: {letters}}}"
            for n, (name, letters) in enumerate(channel_letters(self.args.channels), start=1)
        )
        self._config.write_text(
            f"listen: 127.0.0.1:{port}\ndatabase: admin.sqlite\npolicy: policy.yaml\n"
            f"{_hashing_yaml(self._hashing)}"
            "feeds:\n  - name: EQUITIES\n    message_model: feedha.v1.MarketUpdate\n    channels:\n"
            f"{channels}\n"
        )
        names = ", ".join(name for name, _letters in channel_letters(self.args.channels))
        bindings = f"adapters:\n  feed: {{channels: [{names}], ids: [1, 2, 3]}}\n"  # groups of 3
        (self.workdir / "policy.yaml").write_text(POLICY + bindings)
        self.admin = f"127.0.0.1:{port}"
        for user, groups, roles in (*USERS, ADAPTERS_USER):
            self.add_user(user, groups=groups, roles=roles)
        command = [sys.executable, "-m", "feedha", "admin-server", "--config", str(self._config)]
        admin = JsonProcess(
            "admin-server", [*command, "--metrics", "127.0.0.1:0", "--health", "127.0.0.1:0"], log=self.log
        )
        self.procs.append(admin)
        deadline = time.monotonic() + 30
        while not any(t.startswith("http listening on") for t in admin.text):
            if time.monotonic() > deadline or not admin.alive:
                raise ProcessError("the admin server did not start (see the log)")
            time.sleep(0.05)  # poll interval of a deadline-bounded wait
        line = next(t for t in admin.text if t.startswith("http listening on"))
        self.http = "http://" + line.split()[3]
        probes = [t for t in admin.text if t.startswith("health listening on")]
        self.admin_health = "http://" + probes[0].split()[3] if probes else ""
        # One-time and short-lived; printed on our stdout only (never into the components' log).
        store = Store(self._database)
        try:
            token = new_login_link(store, "operator", now=time.time())
        finally:
            store.close()
        self.status_page = f"{self.http}/login?token={token}"

    def add_user(self, user: str, *, groups: Sequence[str] = (), roles: Sequence[str] = ()) -> dict[str, str]:
        """Create a user as ``feedha admin-server add-user`` does; write and return its key file's fields.

        In this process: an ``add-user`` process a user took ~0.6 s of the start, mostly its imports.
        """
        store = Store(self._database)
        try:
            key_id, secret = issue_key(
                store,
                self._hashing.hasher(),
                user,
                groups=frozenset(groups),
                roles=frozenset(roles),
                by="feedha-up",
                now=time.time(),
            )
        finally:
            store.close()
        path = self.workdir / "users" / f"{user}.json"
        path.parent.mkdir(exist_ok=True)
        key = {"admin": self.admin, "user": user, "key_id": key_id, "secret": secret}
        _write_private(path, json.dumps(key) + "\n")
        self.key_files[user] = str(path)
        return key

    def start_groups(self) -> dict[str, str]:
        feed = json.loads(Path(self.key_files["feed"]).read_text())
        env = {**os.environ, "FEEDHA_ADAPTER_SECRET": feed["secret"]}
        keys = self.keys
        keys.mkdir(mode=0o700, exist_ok=True)
        write_keys(keys / "source.key")
        control = self.workdir / "control"
        control.mkdir(mode=0o700, exist_ok=True)  # ipc sockets: only this user may enter
        endpoints: dict[str, str] = {}
        for number, (name, letters) in enumerate(channel_letters(self.args.channels), start=1):
            endpoints[letters] = f"tcp://127.0.0.1:{free_ports(1)[0]}"
            group = plan_group(
                channel=name,
                channel_number=number,
                source_endpoint=endpoints[letters],
                source_stream=letters,
                source_stream_number=number,
                size=3,
                journal_root=self.workdir / "journals",
                delayed=True,
                conflate_interval=self.args.conflate_interval,
            )
            group = _local_control(group, control)
            self.groups.append(group)
            write_keys(keys / f"{name}.sync.key")
            for plan in group.adapters:
                write_keys(keys / f"{name}.{plan.adapter}.key")
                extra = [
                    *("--admin", self.admin, "--admin-key-id", feed["key_id"]),
                    *("--curve-key", str(keys / f"{name}.{plan.adapter}.key")),
                    *("--sync-key", str(keys / f"{name}.sync.key")),
                    *("--source-key", str(keys / "source.key.pub")),
                    *("--heartbeat-timeout", "1.0", "--log-level", "INFO"),
                    *("--delay", f"{self.args.delay:g}"),
                    *("--metrics", "127.0.0.1:0", "--health", "127.0.0.1:0"),
                ]
                proc = start_adapter(
                    group, plan.adapter, active=plan.adapter == 1, extra=extra, log=self.log, env=env
                )
                self.adapters.append(proc)
                self.procs.append(proc)
        for proc in self.adapters:
            proc.wait_event("ready", 30)
        return endpoints

    def wait_registered(self, timeout: float = REGISTER_S) -> None:
        """Until the admin server lists every adapter of every group as up (as the operator).

        An adapter says ``ready`` before its registration reaches the admin server;
        a subscription made in between would get a route without that adapter's line.
        """
        expected = {f"{group.channel}.{plan.adapter}" for group in self.groups for plan in group.adapters}
        key = json.loads(Path(self.key_files["operator"]).read_text())

        async def poll() -> None:
            async with open_channel(self.admin) as channel:  # plaintext to loopback
                md = (await login(channel, key["key_id"], key["secret"], timeout_s=10.0)).metadata
                stub = admin_pb2_grpc.AdminControlStub(channel)  # type: ignore[no-untyped-call]
                deadline = time.monotonic() + timeout
                while True:
                    reply = await stub.ListAdapters(
                        admin_pb2.ListAdaptersRequest(page_size=len(expected) + 1), metadata=md, timeout=10.0
                    )
                    up = {a.registration.adapter_id for a in reply.adapters if a.is_up}
                    if expected <= up:
                        return
                    if time.monotonic() > deadline:
                        missing = ", ".join(sorted(expected - up))
                        raise ProcessError(
                            f"not registered with the admin server in {timeout:g} s: {missing}"
                        )
                    await asyncio.sleep(0.05)  # poll interval of a deadline-bounded wait

        try:
            asyncio.run(poll())
        except grpc.aio.AioRpcError as exc:
            raise ProcessError(f"the admin server refused the operator: {exc.code().name}") from exc

    def start_source(self, endpoints: dict[str, str]) -> None:
        # The Spark job batches by its micro-batch trigger; the plain source sends each message when due.
        extra = ["--master", self.args.spark_master] if self.args.source == "spark" else []
        extra += ["--curve-key", str(self.keys / "source.key")]
        for path in sorted(self.keys.glob("*.*.key.pub")):  # each adapter's own key, not the sync keys
            if not path.name.endswith(".sync.key.pub"):
                extra += ["--allow-key", str(path)]
        source = start_source(
            endpoints,
            kind=self.args.source,
            rate=self.args.rate,
            wait_subscribers=3,
            workdir=self.workdir,
            extra=extra,
            log=self.log,
        )
        self.source = source
        self.procs.append(source)

    def describe(self) -> dict[str, Any]:
        ready = [proc.last("ready") for proc in self.adapters]
        adapters = [f"http://{event['metrics']}/metrics" for event in ready if event and event.get("metrics")]
        probes = [f"http://{event['health']}" for event in ready if event and event.get("health")]
        return {
            "admin": self.admin,
            "status_page": self.status_page,
            "metrics": [f"{self.http}/metrics", *adapters],
            "health": [self.admin_health, *probes] if self.admin_health else probes,
            "users": {user: self.key_files[user] for user, _groups, _roles in USERS},
            "channels": [
                {
                    "name": g.channel,
                    "number": g.channel_number,
                    "lines": list(g.lines),
                    "delayed_lines": list(g.delayed_lines),
                    "conflated_lines": list(g.conflated_lines),
                    "replay": list(g.replays),
                }
                for g in self.groups
            ],
            "dir": str(self.workdir),
            "log": str(self.workdir / "components.log"),
        }

    def stop(self) -> None:
        for proc in self.adapters:
            proc.stop(timeout=10)  # SIGTERM: they unregister and close their journals
        if self.source is not None:
            self.source.stop(timeout=90)  # the Spark job stops between micro-batches, then its cluster
        for proc in self.procs:
            proc.kill()


def _local_control(group: GroupPlan, directory: Path) -> GroupPlan:
    """The group with its control sockets as ``ipc://`` files in ``directory`` (mode 0700)."""
    adapters = tuple(
        dataclasses.replace(plan, control=f"ipc://{directory / f'{group.channel}.{plan.adapter}'}")
        for plan in group.adapters
    )
    return dataclasses.replace(group, adapters=adapters)


def _hashing_yaml(hashing: SecretHashing) -> str:
    # The admin server's config hashes new secrets at the cost this process does (nothing: its default).
    if hashing == SecretHashing():
        return ""
    fields = ", ".join(f"{name}: {value}" for name, value in dataclasses.asdict(hashing).items())
    return f"secret_hashing: {{{fields}}}\n"


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(fd, "w", encoding="utf-8") as out:
        out.write(text)


def build_parser() -> argparse.ArgumentParser:
    """The ``feedha up`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="feedha up", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--channels", type=int, default=2, help="adapter groups, 1..26 (default: %(default)s)"
    )
    parser.add_argument(
        "--source", choices=("plain", "spark"), default="plain", help="feed source (default: plain)"
    )
    parser.add_argument(
        "--spark-master",
        default="local[*]",
        help="with --source spark: local[N], spark://HOST:PORT, or local-cluster (a standalone master and "
        "two workers on this machine, the job submitted with spark-submit) (default: %(default)s)",
    )
    parser.add_argument("--rate", type=float, default=1000, help="source messages/s (default: %(default)s)")
    parser.add_argument(
        "--delay",
        type=float,
        default=900.0,
        help="the delayed lines' delay in seconds (default: %(default)g, 15 minutes)",
    )
    parser.add_argument(
        "--conflate-interval",
        type=float,
        default=1.0,
        help="the conflated lines' interval in seconds (default: %(default)g)",
    )
    parser.add_argument(
        "--dir", type=Path, help="work directory (default: a new temporary one, removed at exit)"
    )
    parser.add_argument(
        "--secret-hashing",
        choices=sorted(_HASHING),
        default="fast",
        help="argon2id cost of the API keys: fast (8 MiB, for development) or default (the production "
        "cost, 64 MiB a login) (default: %(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="print only the JSON line (no progress text)")
    return parser


def _refused(args: argparse.Namespace) -> str | None:
    # Why the options cannot run, or None.
    if not 1 <= args.channels <= 26 or args.rate <= 0 or args.delay <= 1.0:
        return "need 1 <= --channels <= 26, --rate > 0 and --delay > 1"
    if not 0.01 <= args.conflate_interval <= 3600:
        return "need 0.01 <= --conflate-interval <= 3600"
    if args.source == "spark" and shutil.which("java") is None:
        return "no java on PATH: use --source plain"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``feedha up``."""
    args = build_parser().parse_args(argv)
    refused = _refused(args)
    if refused is not None:
        print(f"feedha up: {refused}", file=sys.stderr)
        return 2
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="feedha-up-"))
    workdir.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    with open(workdir / "components.log", "w") as log:
        cluster = Cluster(args, workdir, log)
        try:
            if not args.json:
                print(f"feedha up: starting in {workdir}", file=sys.stderr)
            cluster.start_admin()
            cluster.start_source(cluster.start_groups())
            cluster.wait_registered()
            print(json.dumps(cluster.describe()), flush=True)
            if not args.json:
                print("feedha up: running; Ctrl-C stops it", file=sys.stderr)
            while not stop.wait(0.5):
                dead = [p.name for p in cluster.procs if not p.alive]
                if dead:
                    print(
                        f"feedha up: {', '.join(dead)} ended (see {workdir / 'components.log'})",
                        file=sys.stderr,
                    )
                    return 1
            return 0
        except ProcessError as exc:
            print(f"feedha up: {exc} (see {workdir / 'components.log'})", file=sys.stderr)
            return 1
        finally:
            cluster.stop()
            if args.dir is None:
                shutil.rmtree(workdir, ignore_errors=True)
