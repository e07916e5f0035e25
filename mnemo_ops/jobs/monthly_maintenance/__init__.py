"""The integrity audit (checks.py, read-only) and its safe repairs (repairs.py) used by monthly-maintenance."""
