"""mnemo-ops: scheduled maintenance jobs for a Mnemosyne agent memory database."""

__version__ = "0.1.0"
