"""feedha's protocol package: the .proto schema, the code generated from it, and
the pure codecs for the data-plane wire format (``proto.wire``) and the FIX-style
source format (``proto.fix``).

Regenerate the ``*_pb2.py`` / ``*_pb2.pyi`` files with ``python scripts/gen_proto.py``;
``python scripts/gen_proto.py --check`` fails when they are stale.
"""
