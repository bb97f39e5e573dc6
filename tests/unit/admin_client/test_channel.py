"""admin_client's pure helpers: bearer metadata and gRPC error translation."""

from __future__ import annotations

import grpc
import pytest

from admin_client import (
    AdminClientError,
    AdminUnavailable,
    AuthenticationFailed,
    BearerToken,
    PermissionDenied,
    error_from_rpc,
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
