"""Tests of `mnemo_ops.integrity`: the read-only checks and the safe repairs of monthly-maintenance."""
