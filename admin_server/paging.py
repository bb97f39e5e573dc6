"""Paging of the List calls: page sizes and opaque page tokens (pure).

A list is sorted by a key (a tuple of strings and numbers); a page token is
the key of the last item handed out, with the list it belongs to (its
*scope*: the call and its filter), JSON in URL-safe base64. The next page
starts after that key, so items added or removed between calls never shift a
page: nothing is repeated, and nothing that stayed is skipped. A token is
opaque to clients; one that does not decode, or comes from another list, is
refused with the field named.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import json
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

from feedha.admin_server.errors import FieldViolation, InvalidArgumentError

DEFAULT_PAGE_SIZE: Final = 100
MAX_PAGE_SIZE: Final = 1000
MAX_TOKEN_LENGTH: Final = 1024

_T = TypeVar("_T")
Key = tuple[Any, ...]


def _refuse(field: str, reason: str, description: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"{field}: {description}",
        violations=[FieldViolation(field=field, reason=reason, description=description)],
    )


def encode_token(scope: str, key: Key) -> str:
    """The page token that resumes ``scope`` after ``key``."""
    raw = json.dumps({"scope": scope, "after": list(key)}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_token(token: str, scope: str) -> Key:
    """The key a page token resumes after.

    Raises:
        InvalidArgumentError: the token is malformed, too long, or from another list (field ``page_token``).
    """
    if len(token) > MAX_TOKEN_LENGTH:
        raise _refuse("page_token", "PAGE_TOKEN_INVALID", f"longer than {MAX_TOKEN_LENGTH} characters")
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, binascii.Error) as exc:
        raise _refuse("page_token", "PAGE_TOKEN_INVALID", "not a page token of this server") from exc
    if not isinstance(data, dict) or not isinstance(data.get("after"), list):
        raise _refuse("page_token", "PAGE_TOKEN_INVALID", "not a page token of this server")
    if data.get("scope") != scope:
        raise _refuse("page_token", "PAGE_TOKEN_MISMATCH", "the token belongs to another list or filter")
    return tuple(data["after"])


def page(
    items: Sequence[_T], *, key: Callable[[_T], Key], page_size: int, page_token: str, scope: str
) -> tuple[list[_T], str]:
    """One page of ``items`` (sorted by ``key``) and the token of the next ("" after the last).

    Args:
        items: the whole list, sorted by ``key``.
        key: an item's sort key.
        page_size: the most items to return; 0 means :data:`DEFAULT_PAGE_SIZE`, and
            more than :data:`MAX_PAGE_SIZE` is cut to it.
        page_token: "" for the first page, else a previous page's next token.
        scope: the list and its filter, e.g. ``"adapters:EQ-A-M"``.

    Raises:
        InvalidArgumentError: a negative ``page_size`` or a bad ``page_token`` (the field named).
    """
    if page_size < 0:
        raise _refuse("page_size", "PAGE_SIZE_NEGATIVE", f"must be >= 0, got {page_size}")
    size = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
    keys = [key(item) for item in items]
    start = 0
    if page_token:
        after = decode_token(page_token, scope)
        try:
            start = bisect.bisect_right(keys, after)
        except TypeError as exc:  # a key of another shape: a forged token
            raise _refuse("page_token", "PAGE_TOKEN_INVALID", "not a page token of this server") from exc
    chunk = list(items[start : start + size])
    more = start + size < len(items)
    return chunk, encode_token(scope, keys[start + size - 1]) if more else ""
