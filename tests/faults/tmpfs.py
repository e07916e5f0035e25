"""A size-limited tmpfs for the disk-full tests: mounted for the test, skipped where it cannot be."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def mounted_tmpfs(mount_point: Path, size: str, mode: str = "0700") -> Iterator[Path]:
    """Mount a tmpfs of `size` (e.g. "24m") on `mount_point` for the block; skip the test if not root.

    Mounting needs root (CI runs as root); elsewhere, or where the kernel refuses, the test is
    skipped with the reason rather than run on a disk that never fills.
    """
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs needs root; the disk-full tests cannot run here")
    mount_point.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode={mode}", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a size-limited tmpfs here ({mounted.stderr.strip()})")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)
