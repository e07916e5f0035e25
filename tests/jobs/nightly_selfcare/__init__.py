"""Tests of the nightly-selfcare job (`test_job.py`) and its stages."""
