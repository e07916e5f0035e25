"""Tests of the backup job (`test_job.py`) and its stages."""
