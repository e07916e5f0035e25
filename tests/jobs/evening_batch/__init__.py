"""Tests of the evening-batch job and its stages."""
