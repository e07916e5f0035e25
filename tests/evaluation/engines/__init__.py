"""Tests of `mnemo_ops.evaluation.engines`: the recall engines the eval and the guard measure with."""
