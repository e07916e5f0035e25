"""Disk space kept for the live agent: the free-space reserve every checkpoint and writing job keeps."""
