"""feedha: the ``feedha`` command line, the demo and the failover drills."""
