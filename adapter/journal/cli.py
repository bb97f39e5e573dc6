"""``feedha journal dump|verify|quarantine``: print the records, check them, or show what was skipped."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from feedha.adapter.journal.format import FLAG_PURGE, ControlRecord, Record
from feedha.adapter.journal.reader import JournalReader
from feedha.adapter.journal.verify import verify_journal


def _time(time_ns: int) -> str:
    moment = _dt.datetime.fromtimestamp(time_ns / 1e9, tz=_dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{time_ns % 1_000_000_000:09d}Z"


def _decode_update(payload: bytes) -> dict[str, Any] | None:
    from google.protobuf import json_format
    from google.protobuf.message import DecodeError

    from feedha.proto import market_pb2

    update = market_pb2.MarketUpdate()
    try:
        update.ParseFromString(payload)
    except DecodeError:
        return None
    return json_format.MessageToDict(update)


def _boundary(record: Record) -> str:
    """`` END OF SESSION 3 -> 4 (operator)`` for a session-boundary record, else ``""``."""
    if not record.is_session_boundary:
        return ""
    update = _decode_update(record.payload) or {}
    boundary = update.get("sessionBoundary", {})
    reason = str(boundary.get("reason", "")).removeprefix("SESSION_REASON_").lower() or "?"
    return f" END OF SESSION {boundary.get('ended', '?')} -> {boundary.get('started', '?')} ({reason})"


def _line(record: Record, *, as_json: bool) -> str:
    if not as_json:
        return (
            f"{record.msg_seq} {_time(record.time_ns)} stream={record.source_stream} "
            f"source_seq={record.source_seq} size={len(record.payload)}{_boundary(record)}"
        )
    item: dict[str, Any] = {
        "msg_seq": record.msg_seq,
        "time_ns": record.time_ns,
        "time": _time(record.time_ns),
        "source_stream": record.source_stream,
        "source_seq": record.source_seq,
        "payload_size": len(record.payload),
        "flags": record.flags,
    }
    if record.is_session_boundary:
        item["session_boundary"] = True
    update = _decode_update(record.payload)
    if update is None:
        item["payload_hex"] = record.payload.hex()
    else:
        item["update"] = update
    return json.dumps(item, sort_keys=True)


def _control_line(control: ControlRecord, *, as_json: bool) -> str:
    item: dict[str, Any] = {
        "control": "purge" if control.flags & FLAG_PURGE else "unknown",
        "flags": control.flags,
        "after_msg_seq": control.after_seq,
        "time_ns": control.time_ns,
        "time": _time(control.time_ns),
    }
    purge = _decode_purge(control.payload) if control.flags & FLAG_PURGE else None
    if purge is not None:
        item["purge"] = purge
    if as_json:
        return json.dumps(item, sort_keys=True)
    if purge is None:
        return (
            f"-- control record flags={control.flags:#06x} after msg_seq {control.after_seq} {item['time']}"
        )
    return (
        f"-- purge {purge['purge_id']}: msg_seq {purge['first_msg_seq']}..{purge['last_msg_seq']} "
        f"by {purge['issued_by'] or '-'} (term {purge['term']}): {purge['reason']!r} "
        f"[written after msg_seq {control.after_seq}, {item['time']}]"
    )


def _decode_purge(payload: bytes) -> dict[str, Any] | None:
    from feedha.adapter.core.purge import decode_purge

    try:
        return decode_purge(payload).as_dict()
    except ValueError:
        return None


def _dump(args: argparse.Namespace) -> int:
    reader = JournalReader(args.directory)
    records: Iterator[Record]
    controls: list[ControlRecord] = []
    if args.follow:
        records = reader.follow(args.from_seq, args.to_seq, controls=controls)
    else:
        records = reader.read(args.from_seq, args.to_seq, controls=controls)
    try:
        for record in records:
            # A control record sits after the message its after_seq names: print it there.
            while controls and controls[0].after_seq < record.msg_seq:
                print(_control_line(controls.pop(0), as_json=args.json), flush=args.follow)
            print(_line(record, as_json=args.json), flush=args.follow)
        for control in controls:
            print(_control_line(control, as_json=args.json))
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        sys.stderr.close()  # a closed pipe (`| head`) is not an error
    return 0


def _verify(args: argparse.Namespace) -> int:
    report = verify_journal(args.directory)
    print(f"journal {args.directory}")
    print(f"  segments: {report.segments}, bytes: {report.bytes}, records: {report.records}")
    print(f"  purge records: {report.purges}")
    print(f"  msg_seq: {report.first_seq} .. {report.last_seq}")
    for line in report.checkpoints:
        print(f"  checkpoint {line}")
    for warning in report.warnings:
        print(f"  warning: {warning}")
    for error in report.errors:
        print(f"  ERROR: {error}")
    print("OK" if report.is_ok else f"CORRUPT ({len(report.errors)} errors)")
    return 0 if report.is_ok else 1


def _quarantine(args: argparse.Namespace) -> int:
    from feedha.adapter.journal.quarantine import QUARANTINE_FILE, read_quarantine

    path = args.directory / QUARANTINE_FILE if args.directory.is_dir() else args.directory
    if not path.exists() and not path.with_name(path.name + ".1").exists():
        print(f"feedha journal: no quarantine file at {path}", file=sys.stderr)
        return 2
    try:
        for entry in read_quarantine(path):
            data = entry.pop("data")
            if args.json:
                print(json.dumps({**entry, "data_hex": data.hex()}, sort_keys=True))
            else:
                text = data[:80].replace(b"\x01", b"|").decode("ascii", "replace")
                print(
                    f"{_time(entry['time_ns'])} {entry['reason']} source_seq={entry['source_seq']} "
                    f"size={entry['size']} {entry['detail']} :: {text}"
                )
    except BrokenPipeError:
        sys.stderr.close()
    return 0


def main(argv: list[str]) -> int:
    """Run ``feedha journal dump|verify``.

    Args:
        argv: arguments after ``feedha journal``.

    Returns:
        The exit code: 0, 1 when ``verify`` finds corruption, 2 on bad usage.
    """
    parser = argparse.ArgumentParser(prog="feedha journal", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    dump = commands.add_parser(
        "dump", help="print one line per record; purge records as '-- purge N: msg_seq A..B ...' lines"
    )
    dump.add_argument("directory", type=Path)
    dump.add_argument("--from", dest="from_seq", type=int, default=0, metavar="SEQ", help="first msg_seq")
    dump.add_argument("--to", dest="to_seq", type=int, default=None, metavar="SEQ", help="last msg_seq")
    dump.add_argument("--follow", action="store_true", help="keep printing records as they are written")
    dump.add_argument(
        "--json", action="store_true", help="JSON lines, with the decoded MarketUpdate (and purge records)"
    )
    verify = commands.add_parser("verify", help="check every record and checkpoint; exit 1 on corruption")
    verify.add_argument("directory", type=Path)
    quarantine = commands.add_parser(
        "quarantine", help="print the source messages an adapter skipped (its quarantine file)"
    )
    quarantine.add_argument("directory", type=Path, help="the journal directory, or a quarantine file")
    quarantine.add_argument("--json", action="store_true", help="JSON lines, with the bytes in hex")
    args = parser.parse_args(argv)
    if args.command == "quarantine":
        return _quarantine(args)
    if not args.directory.is_dir():
        print(f"feedha journal: not a directory: {args.directory}", file=sys.stderr)
        return 2
    return _dump(args) if args.command == "dump" else _verify(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
