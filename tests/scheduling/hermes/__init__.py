"""Tests of `mnemo_ops.scheduling.hermes`: our jobs as Hermes' own cron jobs."""
