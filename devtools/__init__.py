"""Tools for developing mnemo-ops, outside the installed package: the generators of the homes the
tests and benchmarks use (`samples`). The editable install puts the repository on ``sys.path``."""
