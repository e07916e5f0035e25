"""Tests of the retrieval-eval job (`test_job.py`) and its stages."""
