"""feedha: the ``feedha`` command line, the demo, ``up`` and the plumbing they share.

The drills live in their own package, :mod:`feedha.drills`.
"""
