"""``fix44``: FIX 4.4 / FIX 5.0 SP2 market data into order books (docs/converters.md)."""
