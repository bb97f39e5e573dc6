"""Build the compiled parts of feedha (the metadata lives in pyproject.toml).

Two small C extensions carry the per-message hot paths that Python cannot
make fast enough (docs/performance.md has the profile behind each):

* ``adapter.journal._native``: CRC32C and journal record framing, a batch per call;
* ``adapter._fastpath``: FIX parse, conversion, state digest, protobuf encode
  and wire blocks for runs of in-order source messages.

Every function in them has a pure-Python reference implementation that the
tests compare byte for byte.
"""

from setuptools import Extension, setup

_CFLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror=implicit-function-declaration"]

setup(
    ext_modules=[
        Extension("adapter.journal._native", ["adapter/journal/_native.c"], extra_compile_args=_CFLAGS),
        Extension("adapter._fastpath", ["adapter/_fastpath.c"], extra_compile_args=_CFLAGS),
    ],
)
