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
from feedha.admin_server.errors import (
    FieldViolation,
    LoginThrottledError,
    NotFoundError,
    PermissionDeniedError,
)
from feedha.admin_server.status import rich_status


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


def _from_server(error: Exception) -> grpc.aio.AioRpcError:
    """What the client sees when the server refuses with ``error`` (the server's own status builder)."""
    status = rich_status(error)
    return grpc.aio.AioRpcError(
        status.code, grpc.aio.Metadata(), grpc.aio.Metadata(*status.trailing_metadata), details=status.details
    )


def test_permission_denied_names_the_symbols_from_the_details_not_the_message() -> None:
    refused = PermissionDeniedError(
        "anything at all",
        symbols=["AAPL", "M*"],
        violations=[FieldViolation("symbols[0]", "SYMBOL_NOT_ENTITLED", "not entitled: 'AAPL'")],
    )
    exc = error_from_rpc(_from_server(refused))
    assert isinstance(exc, PermissionDenied) and exc.code == "PERMISSION_DENIED"
    assert exc.symbols == ("AAPL", "M*") and exc.reason == "SYMBOLS_NOT_ENTITLED"
    assert [v.field for v in exc.violations] == ["symbols[0]"]
    assert (
        error_from_rpc(_rpc_error(grpc.StatusCode.PERMISSION_DENIED, "not entitled to: AAPL")).symbols == ()
    )


def test_every_refusal_carries_its_reason_and_facts() -> None:
    throttled = error_from_rpc(_from_server(LoginThrottledError(2.5)))
    assert (throttled.code, throttled.reason, throttled.retry_after_s) == (
        "RESOURCE_EXHAUSTED",
        "LOGIN_THROTTLED",
        2.5,
    )
    role = error_from_rpc(
        _from_server(PermissionDeniedError("x", reason="ROLE_REQUIRED", metadata={"role": "admin"}))
    )
    assert role.reason == "ROLE_REQUIRED" and role.metadata == {"role": "admin"}
    gone = error_from_rpc(_from_server(NotFoundError("x", reason="SUBSCRIPTION_NOT_FOUND")))
    assert type(gone) is AdminClientError and gone.reason == "SUBSCRIPTION_NOT_FOUND"
    internal = error_from_rpc(_from_server(RuntimeError("a secret path /etc/x")))
    assert internal.code == "INTERNAL" and "/etc/x" not in str(internal)  # nothing leaks


def test_undecodable_details_are_no_details() -> None:
    trailers = grpc.aio.Metadata(("grpc-status-details-bin", b"\xff\x00garbage"))
    error = grpc.aio.AioRpcError(grpc.StatusCode.NOT_FOUND, grpc.aio.Metadata(), trailers, details="x")
    assert error_from_rpc(error).reason == ""


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
