"""proto.template: a layout as literals around slots; filled, nested, and as a %-format."""

from __future__ import annotations

import pytest

from feedha.proto.template import Template


def test_parse_reads_soh_and_slots() -> None:
    template = Template.parse("8=FIX|9={length}|{body}")
    assert template.literals == (b"8=FIX\x019=", b"\x01", b"")
    assert template.slots == ("length", "body")
    assert list(template.pieces()) == [(b"8=FIX\x019=", "length"), (b"\x01", "body"), (b"", None)]
    assert Template.parse("a|b") == Template((b"a\x01b",), ())


@pytest.mark.parametrize("text", ["{a}{a}", "{a:3}", "{a!r}", "{1x}", "{"])
def test_parse_refuses_what_is_not_a_slot(text: str) -> None:
    with pytest.raises(ValueError):
        Template.parse(text)


def test_fill_needs_exactly_every_slot() -> None:
    template = Template.parse("34={seq}|55={symbol}|")
    assert template.fill(seq=b"7", symbol=b"IBM") == b"34=7\x0155=IBM\x01"
    with pytest.raises(KeyError, match="symbol"):
        template.fill(seq=b"7")
    with pytest.raises(KeyError, match="extra"):
        template.fill(seq=b"7", symbol=b"IBM", extra=b"")


def test_substitute_fills_some_slots_with_bytes_or_templates() -> None:
    outer = Template.parse("35=X|49={sender}|{group}")
    inner = Template.parse("268={count}|{entries}")
    nested = outer.substitute(sender=b"FEED", group=inner)
    assert nested == Template((b"35=X\x0149=FEED\x01268=", b"\x01", b""), ("count", "entries"))
    assert nested.fill(count=b"0", entries=b"") == outer.fill(
        sender=b"FEED", group=inner.fill(count=b"0", entries=b"")
    )
    with pytest.raises(KeyError, match="nope"):
        outer.substitute(nope=b"")


def test_printf_makes_a_percent_format() -> None:
    template = Template.parse("100%|34={seq}|58={text}|")
    fmt = template.printf(seq=b"%d")
    assert fmt == b"100%%\x0134=%d\x0158=%s\x01"
    assert fmt % (5, b"hi") == template.fill(seq=b"5", text=b"hi")
