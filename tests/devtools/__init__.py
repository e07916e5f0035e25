"""Tests of `devtools`: the generators of the homes the tests and benchmarks use."""
