"""Tests of `mnemo_ops.mnemosyne`, the one door to Mnemosyne."""
