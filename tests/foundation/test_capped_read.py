"""`read_capped`: a regular file up to its cap, and nothing else (real files, links and FIFOs)."""

from __future__ import annotations

import os
import time

import pytest

from mnemo_ops.foundation.capped_read import (
    NOT_A_FILE,
    SYMLINK,
    TOO_LARGE,
    UNREADABLE,
    ReadRefused,
    read_capped,
)


def test_a_regular_file_is_read_with_the_status_of_what_was_opened(tmp_path):
    path = tmp_path / "item.json"
    path.write_bytes(b'{"content": "caf\xc3\xa9"}')
    data, info = read_capped(path, 64)
    assert data == b'{"content": "caf\xc3\xa9"}'
    assert info.st_ino == os.stat(path).st_ino and info.st_size == len(data)
    # Exactly at the cap is allowed; one byte under it is not.
    assert read_capped(path, len(data))[0] == data
    with pytest.raises(ReadRefused) as refused:
        read_capped(path, len(data) - 1)
    assert refused.value.reason == TOO_LARGE and refused.value.size == len(data)


def test_a_symlink_is_refused_and_its_target_never_read(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("token=abc")
    link = tmp_path / "item.json"
    link.symlink_to(secret)
    with pytest.raises(ReadRefused) as refused:
        read_capped(link, 1024)
    assert refused.value.reason == SYMLINK
    assert "secret" not in str(refused.value) and str(link) in str(refused.value)


def test_a_fifo_is_refused_at_once_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "item.json"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(ReadRefused) as refused:
        read_capped(fifo, 1024)
    assert refused.value.reason == NOT_A_FILE
    assert time.monotonic() - started < 2


def test_a_folder_and_a_missing_file_are_refused_with_their_reason(tmp_path):
    with pytest.raises(ReadRefused) as folder:
        read_capped(tmp_path, 1024)
    assert folder.value.reason == NOT_A_FILE
    with pytest.raises(ReadRefused) as missing:
        read_capped(tmp_path / "gone.json", 1024)
    assert missing.value.reason == UNREADABLE
    assert missing.value.strerror == os.strerror(2)
