"""Tests of the self-reflection job (`test_job.py`) and its stages."""
