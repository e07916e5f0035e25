"""Whether a folder can be written, asked without writing: files on the way, missing folders, and
one line naming the path for an OSError."""

from __future__ import annotations

import errno

import pytest

from mnemo_ops.foundation.writable import (
    FolderError,
    describe_os_error,
    require_writable,
    require_writable_file,
    unwritable_file_reason,
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


def test_a_path_no_one_may_write_is_refused_for_every_user_root_included(tmp_path):
    folder, database = tmp_path / "data", tmp_path / "data" / "memory.db"
    folder.mkdir()
    database.write_bytes(b"")
    database.chmod(0o444)
    assert unwritable_file_reason(database) == "it is read-only (mode 0444)"
    with pytest.raises(FolderError) as raised:
        require_writable_file(database, "the memory database", "chmod u+w it")
    assert raised.value.exit_code == 2 and str(database) in raised.value.message
    database.chmod(0o644)
    assert unwritable_file_reason(database) is None
    assert unwritable_file_reason(tmp_path / "missing.db") is None  # the folder's check covers it
    folder.chmod(0o555)
    try:
        assert unwritable_reason(folder / "new") == (folder, "it is read-only (mode 0555)")
    finally:
        folder.chmod(0o755)
