"""The foundation layer: what every other layer may use and what imports nothing of ours above it.

Errors and exit codes, the clock, where packaged files live, private file writes, and the one
child-process boundary.
"""
