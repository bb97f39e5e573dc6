"""Paging of the List calls: every item once, in order, across pages, whatever changes in between."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from feedha.admin_server import paging
from feedha.admin_server.errors import InvalidArgumentError

ITEMS = [("EQ-A-M", f"a{n:02d}") for n in range(25)]


def _key(item: tuple[str, str]) -> tuple[str, str]:
    return item


def _all_pages(items: list[tuple[str, str]], size: int) -> list[list[tuple[str, str]]]:
    pages, token = [], ""
    while True:
        chunk, token = paging.page(items, key=_key, page_size=size, page_token=token, scope="adapters:")
        pages.append(chunk)
        if not token:
            return pages


@given(st.integers(min_value=1, max_value=30))
def test_pages_hand_out_every_item_once_in_order(size: int) -> None:
    pages = _all_pages(ITEMS, size)
    assert [item for chunk in pages for item in chunk] == ITEMS
    assert all(len(chunk) == size for chunk in pages[:-1])


def test_defaults_and_the_ceiling() -> None:
    many = [("c", f"{n:05d}") for n in range(2500)]
    first, token = paging.page(many, key=_key, page_size=0, page_token="", scope="s")
    assert len(first) == paging.DEFAULT_PAGE_SIZE and token
    big, _token = paging.page(many, key=_key, page_size=10**9, page_token="", scope="s")
    assert len(big) == paging.MAX_PAGE_SIZE
    assert paging.page([], key=_key, page_size=5, page_token="", scope="s") == ([], "")


def test_items_added_or_removed_between_pages_shift_nothing() -> None:
    first, token = paging.page(ITEMS, key=_key, page_size=10, page_token="", scope="s")
    changed = [item for item in ITEMS if item != ITEMS[3]] + [("EQ-A-M", "a05x"), ("AAA", "first")]
    second, _token = paging.page(sorted(changed), key=_key, page_size=10, page_token=token, scope="s")
    assert second[0] == ITEMS[10] and not set(first) & set(second)


@pytest.mark.parametrize(
    ("size", "token", "field", "reason"),
    [
        (-1, "", "page_size", "PAGE_SIZE_NEGATIVE"),
        (5, "not base64!", "page_token", "PAGE_TOKEN_INVALID"),
        (5, "x" * 5000, "page_token", "PAGE_TOKEN_INVALID"),
        (5, paging.encode_token("subscriptions", (1.0, "s")), "page_token", "PAGE_TOKEN_MISMATCH"),
        (5, paging.encode_token("s", (1.0, 2, 3)), "page_token", "PAGE_TOKEN_INVALID"),  # a forged key
    ],
)
def test_bad_sizes_and_tokens_name_the_field(size: int, token: str, field: str, reason: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        paging.page(ITEMS, key=_key, page_size=size, page_token=token, scope="s")
    (violation,) = caught.value.violations
    assert (violation.field, violation.reason) == (field, reason)
    assert isinstance(caught.value, ValueError)
