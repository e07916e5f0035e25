"""Tests of `mnemo_ops.cli`: the commands as a user runs them."""
