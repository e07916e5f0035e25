"""Tests of the memory-maintain job (`test_job.py`) and its stages."""
