"""Settings every test shares.

Hypothesis: no per-example deadline and no "too slow" health check. Both are
timing asserts, which the suite does not make (speed is the benchmarks'
business, bench/), and on a loaded two-core machine they fail property tests
whose property holds.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile("feedha", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("feedha")
