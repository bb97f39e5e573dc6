"""``feedha-fix``: feedha's own FIX dialect, converted by the YAML converter table (docs/converters.md)."""
