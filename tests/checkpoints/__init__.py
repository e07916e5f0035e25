"""Tests of `mnemo_ops.checkpoints`: create, verify, restore, the catalog, the pre-write hook."""
