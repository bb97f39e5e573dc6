"""admin_client's pure helpers: bearer metadata and gRPC error translation."""

from __future__ import annotations

import argparse
from pathlib import Path

import grpc
import pytest

from feedha.admin_client import (
    AdminClientError,
    AdminUnavailable,
    AuthenticationFailed,
    BearerToken,
    PermissionDenied,
    TlsConfig,
    TlsFileError,
    add_tls_arguments,
    error_from_rpc,
    tls_from_files,
)


def test_bearer_token_metadata_and_repr() -> None:
    token = BearerToken(token="s3cret", user="alice")
    assert token.metadata == (("authorization", "Bearer s3cret"),)
    assert "s3cret" not in repr(token) and "alice" in repr(token)


def _rpc_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details)


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (grpc.StatusCode.UNAUTHENTICATED, AuthenticationFailed),
        (grpc.StatusCode.PERMISSION_DENIED, PermissionDenied),
        (grpc.StatusCode.UNAVAILABLE, AdminUnavailable),
        (grpc.StatusCode.NOT_FOUND, AdminClientError),
    ],
)
def test_error_from_rpc(code: grpc.StatusCode, cls: type[AdminClientError]) -> None:
    exc = error_from_rpc(_rpc_error(code, "no"))
    assert type(exc) is cls and exc.code == code.name


def test_permission_denied_names_the_symbols() -> None:
    exc = error_from_rpc(_rpc_error(grpc.StatusCode.PERMISSION_DENIED, "not entitled to: AAPL, MSFT"))
    assert isinstance(exc, PermissionDenied)
    assert exc.symbols == ("AAPL", "MSFT")


def test_tls_from_files(tmp_path: Path) -> None:
    assert tls_from_files() is None  # plaintext
    assert tls_from_files(enabled=True) == TlsConfig()  # system roots
    (tmp_path / "ca.pem").write_bytes(b"CA")
    (tmp_path / "c.pem").write_bytes(b"CERT")
    (tmp_path / "k.pem").write_bytes(b"KEY")
    tls = tls_from_files(tmp_path / "ca.pem", tmp_path / "c.pem", str(tmp_path / "k.pem"))
    assert tls == TlsConfig(root_certificates=b"CA", certificate_chain=b"CERT", private_key=b"KEY")
    assert "KEY" not in repr(tls)
    with pytest.raises(ValueError, match="both cert and key"):
        tls_from_files(tmp_path / "ca.pem", cert=tmp_path / "c.pem")
    with pytest.raises(TlsFileError) as caught:
        tls_from_files(tmp_path / "missing.pem")
    assert caught.value.path == tmp_path / "missing.pem" and "missing.pem" in str(caught.value)
    assert isinstance(caught.value, AdminClientError)


def test_add_tls_arguments() -> None:
    parser = argparse.ArgumentParser()
    add_tls_arguments(parser, prefix="admin-tls")
    args = parser.parse_args(
        ["--admin-tls-ca", "ca.pem", "--admin-tls-cert", "c.pem", "--admin-tls-key", "k.pem"]
    )
    assert (args.admin_tls_ca, args.admin_tls_cert, args.admin_tls_key) == (
        Path("ca.pem"),
        Path("c.pem"),
        Path("k.pem"),
    )
