"""The retrieval eval: suites, metrics, baselines, history and benchmark importers."""
