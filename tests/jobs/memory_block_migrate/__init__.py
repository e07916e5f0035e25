"""Tests of the memory-block-migrate job (`test_job.py`) and its stages."""
