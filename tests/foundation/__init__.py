"""Tests of `mnemo_ops.foundation`: errors, exit codes, the clock, private files, the capped read."""
