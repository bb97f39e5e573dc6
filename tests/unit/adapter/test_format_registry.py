"""adapter/formats/registry.py: one line a format; the adapter's configuration asks it."""

from __future__ import annotations

import pytest

from feedha.adapter.conversion.engine import ConversionEngine
from feedha.adapter.formats.registry import (
    DEFAULT_FORMAT,
    FORMATS,
    engine_for_format,
    format_named,
    option_problems,
)
from feedha.proto.registry import DEFAULT_INPUT_FORMAT


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_format_makes_an_empty_engine_held_to_the_budget(name: str) -> None:
    engine = engine_for_format(name, table_budget=12_345_678)
    assert isinstance(engine, ConversionEngine)
    assert len(engine.state) == 0 and engine.state.table_budget == 12_345_678
    assert format_named(name).name == name


def test_an_unknown_format_is_refused_with_the_names_there_are() -> None:
    with pytest.raises(
        ValueError, match=r"unknown input format 'fix43'; one of \['feedha-fix', 'fix44', 'itch50'\]"
    ):
        format_named("fix43")


def test_an_option_the_format_does_not_read_names_those_that_do() -> None:
    assert option_problems("itch50", ["securities", "converter_table"]) == [
        "securities applies to input_format fix44 only",
        "converter_table applies to input_format feedha-fix only",
    ]
    assert option_problems("fix44", ["securities", "book_depth"]) == []


def test_the_registration_default_is_the_adapters_default_format() -> None:
    # proto cannot import the adapter: the admin API's default for an adapter from before formats.
    assert DEFAULT_INPUT_FORMAT == DEFAULT_FORMAT
