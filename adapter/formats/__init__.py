"""The input formats: one folder each, and the registry that lists them (docs/converters.md).

:mod:`.interface` says what a format is (:class:`~.interface.Format`);
:mod:`.registry` is the one list of them; each folder (``feedha_fix``, ``fix44``,
``itch50``) holds its format's own code. Nothing outside the folders and the
registry names a format. Pure.
"""
