"""Tests of `mnemo_ops.disk`: the free-space reserve kept for the live agent."""
