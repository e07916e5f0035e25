"""Whether a folder can be written, asked without writing: files on the way, missing folders, and
one line naming the path for an OSError."""

from __future__ import annotations

import errno

import pytest

from mnemo_ops.foundation.writable import (
    FolderError,
    describe_os_error,
    require_writable,
    unwritable_reason,
)


def test_a_missing_folder_under_a_writable_one_is_fine_and_nothing_is_created(tmp_path):
    target = tmp_path / "state" / "backups"
    assert unwritable_reason(target) is None
    assert not (tmp_path / "state").exists()


def test_a_file_on_the_way_is_named(tmp_path):
    (tmp_path / "state").write_text("not a folder")
    path, reason = unwritable_reason(tmp_path / "state" / "backups")
    assert path == tmp_path / "state" and reason == "it is a file, not a folder"
    with pytest.raises(FolderError) as raised:
        require_writable(tmp_path / "state" / "backups", "checkpoints", "move it away")
    assert raised.value.exit_code == 2
    assert raised.value.message == (
        f"cannot write checkpoints: {tmp_path / 'state'} (on the way to "
        f"{tmp_path / 'state' / 'backups'}): it is a file, not a folder; move it away"
    )


def test_an_os_error_is_one_line_with_its_path_and_what_to_do():
    line = describe_os_error(PermissionError(errno.EPERM, "Operation not permitted", "/x/locks"))
    assert line.startswith("Operation not permitted: /x/locks; make it writable by ")
    assert "\n" not in line
    assert "move it away" in describe_os_error(
        NotADirectoryError(errno.ENOTDIR, "Not a directory", "/x/README.md/home")
    )
