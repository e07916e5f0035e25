"""Tests of the bridge-drain job (`test_job.py`) and its stages."""
