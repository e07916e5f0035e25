"""Tests of `mnemo_ops.monitoring`: healthchecks pings, the Prometheus textfile, syslog."""
