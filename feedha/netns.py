"""A small network segment in Linux network namespaces, for multi-host drills.

Theory of operation
-------------------
One *segment* is a Linux bridge in the root namespace and one network
namespace per *host* (admin server, feed source, each adapter, subscribers),
each joined to the bridge by a veth pair. Host ``i`` gets ``10.231.N.(i+1)/24``
on its ``veth0`` (``N`` picked per segment so segments never overlap; the
bridge takes ``.254`` so the root namespace can reach the hosts), a
``224.0.0.0/4`` route on ``veth0`` so multicast leaves by it, and the bridge
floods multicast (IGMP snooping off: there is no querier on a test segment).
Every name starts with the segment's *tag* (``fh`` + hex, unique per
segment), so :func:`destroy` finds everything by the tag alone, even after a
crash, and two segments never touch each other.

Faults (a drill sets them; :func:`destroy` takes them away with the segment):

- :meth:`Segment.cut` sets the host's bridge-side veth down (the host is cut
  off; its processes keep running, as on a host whose switch port died);
- :meth:`Segment.partition` drops TCP between two hosts on the given ports
  (the sync bus) with an nftables table in each of the two namespaces;
- :meth:`Segment.set_loss` drops a fraction of the host's outgoing packets:
  ``tc netem`` where the kernel has it, else an nftables ``numgen random`` rule.

:func:`plan_segment` and the ``*_commands`` functions are pure (plans and
argv lists); :class:`Segment` runs them with ``ip``/``nft``/``tc``.
The kernel caps socket buffers at ``net.core.rmem_max``/``wmem_max``, which
are global, not per namespace: :func:`raise_socket_buffer_limits` raises them
(never lowers) so multicast sockets can get their 16 MiB.

Command line (``python -m feedha.netns``, used by ``deploy/netns/segment``)::

    up NAME HOST...      create a segment tagged NAME and print its plan as JSON
    down NAME            destroy everything tagged NAME
    exec NAME HOST CMD.. run a command in a host's namespace
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

logger = logging.getLogger(__name__)

SUBNET_PREFIX: Final = "10.231"  # segment N is 10.231.N.0/24
BRIDGE_HOST: Final = 254
MAX_HOSTS: Final = 200
SOCKET_BUFFER_MAX: Final = 16 * 1024 * 1024
NS_DEVICE: Final = "veth0"
_TAG_RE: Final = re.compile(r"^[a-z][a-z0-9]{1,8}$")
_HOST_RE: Final = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
_PARTITION_TABLE: Final = "feedha_partition"
_LOSS_TABLE: Final = "feedha_loss"


class NetnsError(RuntimeError):
    """A namespace, link or filter command failed.

    Attributes:
        argv: the command.
        stderr: what it printed on stderr.
    """

    def __init__(self, argv: Sequence[str], stderr: str) -> None:
        super().__init__(f"{' '.join(argv)}: {stderr.strip() or 'failed'}")
        self.argv = list(argv)
        self.stderr = stderr


@dataclass(frozen=True, slots=True)
class HostPlan:
    """One host of a segment: its namespace, address and bridge-side veth."""

    name: str
    namespace: str
    address: str
    veth: str  # the root-namespace end, a port of the bridge


@dataclass(frozen=True, slots=True)
class SegmentPlan:
    """Every name and address of one segment."""

    tag: str
    subnet: int  # N of 10.231.N.0/24
    bridge: str
    bridge_address: str
    hosts: tuple[HostPlan, ...]

    def host(self, name: str) -> HostPlan:
        """The host called ``name``.

        Raises:
            KeyError: no such host.
        """
        for host in self.hosts:
            if host.name == name:
                return host
        raise KeyError(f"no host {name!r} in segment {self.tag} (hosts: {[h.name for h in self.hosts]})")

    def multicast_group(self, index: int) -> str:
        """A multicast group of this segment (``239.192.N.index``), e.g. one per line."""
        if not 0 < index < 255:
            raise ValueError(f"index must be in 1..254, got {index!r}")
        return f"239.192.{self.subnet}.{index}"


# ---- pure planning -----------------------------------------------------------------


def new_tag() -> str:
    """A fresh segment tag, ``fh`` + 5 hex digits (short: it prefixes interface names)."""
    return f"fh{random.getrandbits(20):05x}"


def plan_segment(tag: str, hosts: Sequence[str], subnet: int) -> SegmentPlan:
    """Name and address every part of a segment.

    Raises:
        ValueError: a bad tag, host name, subnet, duplicate or too many hosts.
    """
    if not _TAG_RE.match(tag):
        raise ValueError(f"tag must be 2-9 lowercase letters/digits starting with a letter, got {tag!r}")
    if not 0 < subnet < 255:
        raise ValueError(f"subnet must be in 1..254, got {subnet!r}")
    if not hosts or len(hosts) > MAX_HOSTS:
        raise ValueError(f"need 1..{MAX_HOSTS} hosts, got {len(hosts)}")
    if len(set(hosts)) != len(hosts):
        raise ValueError(f"host names must be unique, got {list(hosts)}")
    for name in hosts:
        if not _HOST_RE.match(name):
            raise ValueError(f"host name must be lowercase letters, digits and '-', got {name!r}")
    base = f"{SUBNET_PREFIX}.{subnet}"
    return SegmentPlan(
        tag=tag,
        subnet=subnet,
        bridge=f"{tag}-br",
        bridge_address=f"{base}.{BRIDGE_HOST}",
        hosts=tuple(
            HostPlan(name, f"{tag}-{name}", f"{base}.{i + 1}", f"{tag}-{i + 1}")
            for i, name in enumerate(hosts)
        ),
    )


def setup_commands(plan: SegmentPlan) -> list[list[str]]:
    """The ``ip`` commands that build the segment, in order."""
    br = plan.bridge
    cmds = [
        ["ip", "link", "add", br, "type", "bridge", "mcast_snooping", "0"],
        ["ip", "addr", "add", f"{plan.bridge_address}/24", "dev", br],
        ["ip", "link", "set", br, "multicast", "on", "up"],
    ]
    for host in plan.hosts:
        ns = host.namespace
        cmds += [
            ["ip", "netns", "add", ns],
            ["ip", "link", "add", host.veth, "type", "veth", "peer", "name", NS_DEVICE, "netns", ns],
            ["ip", "link", "set", host.veth, "master", br, "up"],
            ["ip", "-n", ns, "addr", "add", f"{host.address}/24", "dev", NS_DEVICE],
            ["ip", "-n", ns, "link", "set", NS_DEVICE, "multicast", "on", "up"],
            ["ip", "-n", ns, "link", "set", "lo", "up"],
            ["ip", "-n", ns, "route", "add", "224.0.0.0/4", "dev", NS_DEVICE],
        ]
    return cmds


def partition_script(table: str, peer: str, ports: Sequence[int]) -> str:
    """nftables script for one host: drop TCP to/from ``peer`` on ``ports`` (all IP if none)."""
    if ports:
        port_set = "{ " + ", ".join(str(p) for p in sorted(set(ports))) + " }"
        match_in = [f"ip saddr {peer} tcp sport {port_set}", f"ip saddr {peer} tcp dport {port_set}"]
        match_out = [f"ip daddr {peer} tcp dport {port_set}", f"ip daddr {peer} tcp sport {port_set}"]
    else:
        match_in, match_out = [f"ip saddr {peer}"], [f"ip daddr {peer}"]
    lines = [f"table inet {table} {{", "  chain input { type filter hook input priority 0; policy accept;"]
    lines += [f"    {m} drop" for m in match_in]
    lines += ["  }", "  chain output { type filter hook output priority 0; policy accept;"]
    lines += [f"    {m} drop" for m in match_out]
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def loss_script(table: str, percent: float) -> str:
    """nftables script: drop ``percent`` % of the packets leaving ``veth0`` (netem's fallback)."""
    per_million = round(percent * 10_000)
    return (
        f"table inet {table} {{\n"
        "  chain output { type filter hook output priority 0; policy accept;\n"
        f'    oifname "{NS_DEVICE}" numgen random mod 1000000 < {per_million} drop\n'
        "  }\n}\n"
    )


def _check_percent(percent: float) -> None:
    if not 0 <= percent <= 100:
        raise ValueError(f"percent must be in 0..100, got {percent!r}")


# ---- running it ---------------------------------------------------------------------


def _run(argv: Sequence[str], *, stdin: str | None = None, check: bool = True) -> str:
    proc = subprocess.run(list(argv), input=stdin, capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise NetnsError(argv, proc.stderr)
    return proc.stdout


def is_available() -> bool:
    """True when this process can build segments: root, with ``ip`` and ``nft`` on PATH."""
    return os.geteuid() == 0 and shutil.which("ip") is not None and shutil.which("nft") is not None


def raise_socket_buffer_limits(minimum: int = SOCKET_BUFFER_MAX) -> None:
    """Raise ``net.core.rmem_max``/``wmem_max`` to at least ``minimum`` (global; never lowered)."""
    for name in ("rmem_max", "wmem_max"):
        path = Path("/proc/sys/net/core") / name
        try:
            if int(path.read_text()) < minimum:
                path.write_text(str(minimum))
        except OSError as exc:
            logger.warning("cannot raise net.core.%s to %d: %s", name, minimum, exc)


def _used_subnets() -> set[int]:
    out = _run(["ip", "-4", "-o", "addr", "show"], check=False)
    pattern = re.compile(rf"inet {re.escape(SUBNET_PREFIX)}\.(\d+)\.")
    return {int(m.group(1)) for m in pattern.finditer(out)}


def destroy(tag: str) -> None:
    """Delete every namespace, veth and bridge named with ``tag`` (idempotent; errors are logged)."""
    if not _TAG_RE.match(tag):
        raise ValueError(f"bad tag {tag!r}")
    for ns in _run(["ip", "netns", "list"], check=False).split("\n"):
        name = ns.split(" ")[0]
        if name.startswith(f"{tag}-"):
            _run(["ip", "netns", "del", name], check=False)
    links = _run(["ip", "-o", "link", "show"], check=False)
    for match in re.finditer(rf"^\d+: ({re.escape(tag)}-[^:@]+)[:@]", links, re.MULTILINE):
        _run(["ip", "link", "del", match.group(1)], check=False)
    leftover = [
        m.group(1) for m in re.finditer(rf" ({re.escape(tag)}-[^:@ ]+)[:@]", _run(["ip", "-o", "link"]))
    ]
    if leftover:
        logger.warning("segment %s: links left after teardown: %s", tag, leftover)


class Segment:
    """A running segment; a context manager that always tears it down.

    Args:
        hosts: host names, e.g. ``["source", "adapter-1", "adapter-2", "client"]``.
        tag: the segment's tag (default: a fresh one).

    Raises:
        NetnsError: a command failed (everything built so far is removed).
    """

    def __init__(self, hosts: Sequence[str], *, tag: str | None = None) -> None:
        self._hosts = list(hosts)
        self._tag = tag or new_tag()
        self.plan: SegmentPlan | None = None
        self.cut_hosts: set[str] = set()

    def __repr__(self) -> str:
        state = "down" if self.plan is None else f"10.231.{self.plan.subnet}.0/24"
        return f"<Segment [{self._tag}, hosts={len(self._hosts)}, {state}, cut={sorted(self.cut_hosts)}]>"

    @property
    def tag(self) -> str:
        return self._tag

    def create(self) -> SegmentPlan:
        """Build the bridge, namespaces, veths, addresses and routes; return the plan."""
        used = _used_subnets()
        free = [n for n in range(1, 255) if n not in used]
        if not free:
            raise NetnsError(["ip", "addr"], f"no free {SUBNET_PREFIX}.N.0/24 subnet")
        plan = plan_segment(self._tag, self._hosts, random.choice(free))
        self.plan = plan
        try:
            for argv in setup_commands(plan):
                _run(argv)
            raise_socket_buffer_limits()
        except BaseException:
            self.destroy()
            raise
        logger.info("segment %s up: %s", plan.tag, [(h.name, h.address) for h in plan.hosts])
        return plan

    def destroy(self) -> None:
        """Remove everything of this segment (idempotent)."""
        destroy(self._tag)
        self.plan = None

    def __enter__(self) -> Segment:
        self.create()
        return self

    def __exit__(self, *_: object) -> None:
        self.destroy()

    def _plan(self) -> SegmentPlan:
        if self.plan is None:
            raise RuntimeError(f"segment {self._tag} is not up")
        return self.plan

    def address(self, host: str) -> str:
        """The host's IPv4 address."""
        return self._plan().host(host).address

    def exec_argv(self, host: str, argv: Sequence[str]) -> list[str]:
        """``argv`` wrapped to run in the host's namespace (``ip netns exec NS ...``)."""
        return ["ip", "netns", "exec", self._plan().host(host).namespace, *argv]

    def run(self, host: str, argv: Sequence[str], *, stdin: str | None = None) -> str:
        """Run a command in the host's namespace and return its stdout."""
        return _run(self.exec_argv(host, argv), stdin=stdin)

    def cut(self, host: str) -> None:
        """Cut the host off the segment (its bridge port goes down)."""
        _run(["ip", "link", "set", self._plan().host(host).veth, "down"])
        self.cut_hosts.add(host)

    def partition(self, a: str, b: str, ports: Sequence[int] = ()) -> None:
        """Drop TCP between hosts ``a`` and ``b`` on ``ports`` (every packet between them if empty)."""
        plan = self._plan()
        for here, there in ((a, b), (b, a)):
            script = partition_script(_PARTITION_TABLE, plan.host(there).address, ports)
            self.run(here, ["nft", "-f", "-"], stdin=script)

    def heal_partition(self, a: str, b: str) -> None:
        """Undo :meth:`partition`."""
        for host in (a, b):
            self.run(host, ["nft", "delete", "table", "inet", _PARTITION_TABLE])

    def set_loss(self, host: str, percent: float) -> str:
        """Drop ``percent`` % of the host's outgoing packets; returns how (``netem`` or ``nftables``)."""
        _check_percent(percent)
        try:
            self.run(
                host, ["tc", "qdisc", "replace", "dev", NS_DEVICE, "root", "netem", "loss", f"{percent}%"]
            )
            return "netem"
        except NetnsError:
            pass  # no sch_netem in this kernel: drop with nftables instead
        self.run(host, ["nft", "-f", "-"], stdin=loss_script(_LOSS_TABLE, percent))
        return "nftables"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m feedha.netns up|down|exec``: see the module docstring."""
    parser = argparse.ArgumentParser(
        prog="python -m feedha.netns",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="create a segment and print its plan as JSON")
    up.add_argument("tag")
    up.add_argument("hosts", nargs="+")
    down = sub.add_parser("down", help="destroy a segment")
    down.add_argument("tag")
    ex = sub.add_parser("exec", help="run a command in a host's namespace")
    ex.add_argument("tag")
    ex.add_argument("host")
    ex.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if not is_available():
        print("feedha.netns: needs root, iproute2 (ip) and nftables (nft)", file=sys.stderr)
        return 2
    try:
        if args.cmd == "up":
            plan = Segment(args.hosts, tag=args.tag).create()
            print(json.dumps(asdict(plan), indent=2))
        elif args.cmd == "down":
            destroy(args.tag)
        else:
            ns = f"{args.tag}-{args.host}"
            os.execvp("ip", ["ip", "netns", "exec", ns, *args.command])
    except (NetnsError, ValueError) as exc:
        print(f"feedha.netns: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
