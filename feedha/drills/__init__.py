"""feedha's drills: failover, chaos, abuse and the others, with real processes on this machine.

``feedha drill`` (:mod:`feedha.drills.cli`) runs them. Each drill starts the
components as separate processes (:mod:`feedha.procs`, :mod:`feedha.cluster`),
injects its faults, and accounts for every input its source sent. The
package may import anything of feedha; nothing of the product imports it.
"""
