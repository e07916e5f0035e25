"""The foundation layer: what every other layer may use and what imports nothing of ours above it.

Errors and exit codes, the clock, where packaged files live, private file writes, the capped read
of a file someone else put there, and the one child-process boundary.
"""
