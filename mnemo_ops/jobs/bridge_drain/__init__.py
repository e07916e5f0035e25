"""The capture bridge: the Maildir-style spool (spool.py) and the queue item parser (items.py)."""
