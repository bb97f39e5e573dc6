from __future__ import annotations

import pytest

from feedha.admin_server import tokens
from feedha.admin_server.backoff import LoginBackoff
from feedha.admin_server.errors import AuthenticationError, TokenExpiredError, TokenInvalidError

KEY = b"k" * 32


def test_issue_and_verify() -> None:
    signer = tokens.TokenSigner(KEY, ttl_s=60)
    token, claims = signer.issue(user="alice", key_id="fk_1", now=1000.0)
    verified = signer.verify(token, now=1059.0)
    assert verified == claims
    assert (verified.user, verified.key_id, verified.expires_at) == ("alice", "fk_1", 1060.0)


def test_expired() -> None:
    signer = tokens.TokenSigner(KEY, ttl_s=60)
    token, _ = signer.issue(user="alice", key_id="fk_1", now=1000.0)
    with pytest.raises(TokenExpiredError, match="expired"):
        signer.verify(token, now=1060.0)


@pytest.mark.parametrize("mutate", ["payload", "signature", "other_key", "garbage", "empty"])
def test_forged_tokens(mutate: str) -> None:
    signer = tokens.TokenSigner(KEY)
    token, _ = signer.issue(user="alice", key_id="fk_1", now=0.0)
    payload, signature = token.split(".")
    if mutate == "payload":
        other, _ = signer.issue(user="admin", key_id="fk_1", now=0.0)
        token = other.split(".")[0] + "." + signature
    elif mutate == "signature":
        token = payload + "." + signature[:-2] + ("AA" if signature[-2:] != "AA" else "BB")
    elif mutate == "other_key":
        token, _ = tokens.TokenSigner(b"x" * 32).issue(user="alice", key_id="fk_1", now=0.0)
    elif mutate == "garbage":
        token = "not-a-token"
    else:
        token = ""
    with pytest.raises(TokenInvalidError):
        signer.verify(token, now=1.0)


def test_signer_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="at least 16 bytes"):
        tokens.TokenSigner(b"short")
    with pytest.raises(ValueError, match="ttl_s"):
        tokens.TokenSigner(KEY, ttl_s=0)


def test_secret_hashing_is_salted_and_checked() -> None:
    first, second = tokens.hash_secret("s3cret"), tokens.hash_secret("s3cret")
    assert first != second and first.startswith("$argon2id$")
    tokens.verify_secret(first, "s3cret")
    with pytest.raises(AuthenticationError, match="invalid API key secret"):
        tokens.verify_secret(first, "wrong")


def test_backoff_grows_caps_and_resets() -> None:
    backoff = LoginBackoff(free_failures=2, base_delay_s=1.0, max_delay_s=4.0, forget_after_s=100.0)
    assert backoff.retry_after("p", now=0.0) == 0.0
    assert backoff.on_failure("p", now=0.0) == 0.0
    assert backoff.on_failure("p", now=0.0) == 1.0
    assert backoff.retry_after("p", now=0.5) == 0.5
    assert backoff.retry_after("other", now=0.5) == 0.0  # per peer
    assert backoff.on_failure("p", now=1.0) == 2.0
    assert backoff.on_failure("p", now=3.0) == 4.0
    assert backoff.on_failure("p", now=7.0) == 4.0  # capped
    assert backoff.retry_after("p", now=9.0) == 2.0
    assert backoff.retry_after("p", now=200.0) == 0.0  # forgotten after idle
    backoff.on_failure("q", now=0.0)
    backoff.on_failure("q", now=0.0)
    backoff.on_failure("q", now=0.0)
    backoff.on_success("q")
    assert backoff.retry_after("q", now=0.0) == 0.0
    assert repr(backoff) == "<LoginBackoff [names=0]>"
