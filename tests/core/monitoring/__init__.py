"""Tests of `mnemo_ops.core.monitoring`: healthchecks pings, the Prometheus textfile, syslog."""
