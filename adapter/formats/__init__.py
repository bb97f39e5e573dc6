"""The input formats: one folder each, and the registry that lists them (docs/converters.md).

:mod:`.interface` says what a format is (:class:`~.interface.Format`);
:mod:`.registry` is the one list of them; each folder (``feedha_fix``, ``fix44``,
``itch50``) holds its format's own code. A format's captures and poison
(:class:`~.capture_face.CaptureFace`, its folder's ``capture.py``) are listed
again by :mod:`.capture_registry`, which loads no engine: the plain source
reads it. Nothing outside the folders and the registries names a format. Pure.
"""
