"""Tests of `mnemo_ops.jobs.monthly_maintenance`: the read-only checks and the safe repairs of monthly-maintenance."""
