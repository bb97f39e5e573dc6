"""``itch50``: TotalView-ITCH 5.0 in MoldUDP64 packets into market-by-order books (docs/converters.md)."""
