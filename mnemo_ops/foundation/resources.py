"""Where the files that ship with mnemo-ops live: jobs/, sql/, memory_blocks/, fixtures/.

In a checkout (or an editable install) they are at the top of the repository; a wheel carries them
in ``mnemo_ops/data/``.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parents[1]


def resource_dir(name: str) -> Path:
    """Return the directory (or file) `name` from the packaged data, else from the repository root."""
    packaged = _PACKAGE_DIR / "data" / name
    if packaged.exists():
        return packaged
    return _PACKAGE_DIR.parent / name
