"""Shared building blocks: settings-independent database access, the writer lock, the runner."""
