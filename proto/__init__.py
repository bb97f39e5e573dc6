"""feedha's contracts: the .proto schema, the code generated from it, and pure codecs.

- ``proto.wire``: the data-plane wire format (packets of blocks on a line);
- ``proto.seal``: sealed packets (wire version 2) for multicast lines,
  AES-256-GCM per channel key;
- ``proto.replay``: the retransmission request/reply frames;
- ``proto.fix``: the FIX-style source format;
- ``proto.registry``: the adapter registry's Python-side types (registration,
  status, commands) and their conversions to and from ``admin_pb2``;
- ``proto.token_bucket``: the one token bucket every rate limit is made of;
- ``proto.errors``: :class:`~proto.errors.ProtoError`, the base of every
  decoder's error.

This package imports no ZeroMQ (socket set-up is in ``transport``) and none of
feedha's component packages: they all depend on it, never the reverse
(``scripts/check_layers.py`` enforces it).

Regenerate the ``*_pb2.py`` / ``*_pb2.pyi`` files with ``python scripts/gen_proto.py``;
``python scripts/gen_proto.py --check`` fails when they are stale.
"""
