"""A subscriber with none of feedha's code: what a client in another language has to do.

Run as a program: ``python foreign_client.py ADMIN SYMBOLS COUNT`` with the
key in ``FEEDHA_KEY_ID`` / ``FEEDHA_SECRET``. It refuses to import anything
named ``feedha``. It learns the admin API by gRPC server reflection, logs in,
subscribes, builds the blocks' decoder from the descriptor set the route
carries, reads the channel's active line with CURVE (pyzmq), takes the packets
apart with ``struct`` as docs/wire-format.md lays them out, and prints one
JSON object: the route's model and version, and for each block its
``msg_seq``, ``source_seq``, payload (hex) and the payload decoded to JSON.
"""

from __future__ import annotations

import importlib.abc
import sys


class _NoFeedha(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):  # noqa: ANN001, ANN201 - the finder protocol
        if fullname == "feedha" or fullname.startswith("feedha."):
            raise ImportError(f"{fullname}: this client must not use feedha's code")
        return None


sys.meta_path.insert(0, _NoFeedha())

import json  # noqa: E402 - after the import guard, on purpose
import os  # noqa: E402
import struct  # noqa: E402
import time  # noqa: E402

import grpc  # noqa: E402
import zmq  # noqa: E402
from google.protobuf import descriptor_pool, json_format, message_factory  # noqa: E402
from google.protobuf.descriptor_pb2 import FileDescriptorSet  # noqa: E402
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (  # noqa: E402
    ProtoReflectionDescriptorDatabase,
)

HEADER = struct.Struct(">2sBBHHIQHHQ")  # docs/wire-format.md, "Packet"
BLOCK = struct.Struct(">HHQ")  # length, source_stream, source_seq
DEADLINE_S = 60.0


class Api:
    """The admin server's API as reflection describes it."""

    def __init__(self, target: str) -> None:
        self.channel = grpc.insecure_channel(target)
        self.pool = descriptor_pool.DescriptorPool(ProtoReflectionDescriptorDatabase(self.channel))
        self.token = ""

    def message(self, name: str, **fields):  # noqa: ANN003, ANN201
        return message_factory.GetMessageClass(self.pool.FindMessageTypeByName(name))(**fields)

    def call(self, service: str, method: str, request):  # noqa: ANN001, ANN201
        output = self.pool.FindServiceByName(service).FindMethodByName(method).output_type
        stub = self.channel.unary_unary(
            f"/{service}/{method}",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=message_factory.GetMessageClass(output).FromString,
        )
        metadata = [("authorization", f"Bearer {self.token}")] if self.token else None
        return stub(request, metadata=metadata, timeout=20)

    def stream(self, service: str, method: str, request, timeout: float):  # noqa: ANN001, ANN201
        output = self.pool.FindServiceByName(service).FindMethodByName(method).output_type
        stub = self.channel.unary_stream(
            f"/{service}/{method}",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=message_factory.GetMessageClass(output).FromString,
        )
        return stub(request, metadata=[("authorization", f"Bearer {self.token}")], timeout=timeout)

    def active_role(self) -> int:
        return (
            self.pool.FindEnumTypeByName("feedha.v1.AdapterRole").values_by_name["ADAPTER_ROLE_ACTIVE"].number
        )


def decoder(route):  # noqa: ANN001, ANN201
    """The blocks' message class, from the route's descriptor set alone."""
    pool = descriptor_pool.DescriptorPool()
    for file in FileDescriptorSet.FromString(route.model_descriptor_set).file:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(route.message_model))


def read_blocks(route, line, keys, update_class, count: int) -> list[dict]:  # noqa: ANN001
    context = zmq.Context.instance()
    socket = context.socket(zmq.SUB)
    socket.setsockopt(zmq.LINGER, 0)
    if line.curve_server_key:
        socket.curve_serverkey = line.curve_server_key.encode()
        socket.curve_publickey, socket.curve_secretkey = keys
    socket.setsockopt(zmq.SUBSCRIBE, route.channel_name.encode())
    socket.connect(line.line_endpoint)
    blocks: list[dict] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(blocks) < count and time.monotonic() < deadline:
            if not socket.poll(500):
                continue
            _topic, packet = socket.recv_multipart()
            magic, version, flags, channel, _adapter, _term, first, blocks_in, _reserved, _sent = (
                HEADER.unpack_from(packet)
            )
            if magic != b"FH" or version != 1 or channel != route.channel_number or flags & 1:
                continue  # not a plain data packet of this channel (a heartbeat, say)
            offset = HEADER.size
            for index in range(blocks_in):
                length, stream, source_seq = BLOCK.unpack_from(packet, offset)
                payload = packet[offset + BLOCK.size : offset + 2 + length]
                offset += 2 + length
                if stream == 0:
                    continue  # a tombstone (its payload is another message)
                decoded = update_class.FromString(payload)
                blocks.append({
                    "msg_seq": first + index,
                    "source_seq": source_seq,
                    "payload": payload.hex(),
                    "decoded": json_format.MessageToDict(decoded),
                })  # fmt: skip
    finally:
        socket.close()
    return blocks


def active_line(api: Api, subscription):  # noqa: ANN001, ANN201
    """The first route with an active line that is up, and that line: WatchRoutes gives the
    routes now, then again at every change, so a failover or a restart in progress is waited out."""
    watch = api.message("feedha.v1.WatchRoutesRequest", subscription_id=subscription.subscription_id)
    changes = api.stream("feedha.v1.StreamBroker", "WatchRoutes", watch, timeout=DEADLINE_S)
    for change in changes:
        for route in change.routes:
            for line in route.lines:
                if line.role == api.active_role() and line.is_up:
                    changes.cancel()
                    return route, line
    raise SystemExit("no active line came up")


def main() -> int:
    target, symbols, count = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])
    api = Api(target)
    login = api.message(
        "feedha.v1.LoginRequest", key_id=os.environ["FEEDHA_KEY_ID"], secret=os.environ["FEEDHA_SECRET"]
    )
    api.token = api.call("feedha.v1.AdminAuth", "Login", login).token
    public, secret = zmq.curve_keypair()
    request = api.message("feedha.v1.SubscribeRequest", symbols=symbols, curve_public_key=public.decode())
    subscription = api.call("feedha.v1.StreamBroker", "Subscribe", request)
    route, line = active_line(api, subscription)
    blocks = read_blocks(route, line, (public, secret), decoder(route), count)
    print(json.dumps({
        "model": route.message_model,
        "version": route.model_version,
        "channel": route.channel_name,
        "symbols": list(route.symbols),
        "blocks": blocks,
        "feedha_imported": sorted(name for name in sys.modules if name.split(".")[0] == "feedha"),
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
