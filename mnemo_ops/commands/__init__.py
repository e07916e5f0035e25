"""The command line: one module per command or group, each exposing ``register(app)``."""
