"""The second copy of backups (``backup.copy_to``): real backups of a sample home written by the
real Mnemosyne, copied into a second real folder, verified there, kept by their own count; every
guard shown catching its harm."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest
import yaml

from mnemo_ops.checkpoints import catalog, chunk_store
from mnemo_ops.checkpoints.verify import verify_checkpoint
from mnemo_ops.core.lock import lock_path_for


def write_config(directory: Path, **backup) -> Path:
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump({"backup": backup}), encoding="utf-8")
    return path


def run_backup(cli, config: Path, *args: str) -> tuple[int, dict]:
    completed = cli("--config", str(config), "--json", "run", "backup", *args)
    try:
        return completed.returncode, json.loads(completed.stdout)
    except ValueError:
        raise AssertionError(completed.stdout + completed.stderr) from None


def tree(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every path under `root` with its mode and content (folders: empty)."""
    return {
        str(path.relative_to(root)): (
            path.lstat().st_mode,
            path.read_bytes() if path.is_file() and not path.is_symlink() else b"",
        )
        for path in sorted(root.rglob("*"))
    }


@pytest.fixture
def second_disk(tmp_path) -> Path:
    folder = tmp_path / "second-disk" / "mnemo-backups"
    folder.mkdir(parents=True)
    return folder


@pytest.mark.heavy
def test_each_backup_is_copied_verified_private_and_kept_by_its_own_count(
    sample, cli, tmp_path, second_disk
):
    config = write_config(tmp_path, copy_to=str(second_disk), copy_keep=2)
    names = []
    for _ in range(3):
        code, result = run_backup(cli, config)
        assert code == 0 and result["warnings"] == [], result
        assert result["changes"]["checkpoints_copied"] == 1
        assert result["stats"]["copy"]["verified"] is True
        names.append(result["checkpoint"])
    copies = catalog.list_folder(second_disk, include_failed=False)
    assert [info.name for info in copies] == names[-2:]  # the oldest copy went
    local = {info.name: info for info in catalog.list_folder(sample.state_dir / "backups")}
    for info in copies:
        assert verify_checkpoint(info).ok
        original = local[info.name].path / catalog.MANIFEST
        assert (info.path / catalog.MANIFEST).read_bytes() == original.read_bytes()
    referenced = catalog.referenced_packs(second_disk)
    stored = {chunk_store.pack_of(path) for path in chunk_store.ChunkStore(second_disk).stored()}
    assert referenced and stored == referenced  # no pack missing, none left over
    for path in second_disk.rglob("*"):
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))
    # Nothing staged is left behind in the backups folder.
    assert not [p for p in (sample.state_dir / "backups").iterdir() if p.name.startswith(".copy-")]


def test_a_damaged_copy_is_caught_removed_and_reported_while_the_backup_stands(
    sample, cli, tmp_path, second_disk
):
    config = write_config(tmp_path, copy_to=str(second_disk))
    assert run_backup(cli, config)[0] == 0
    # Bit rot on the second disk: the pack there keeps its size, so only reading it tells.
    (pack,) = chunk_store.ChunkStore(second_disk).stored()
    data = bytearray(pack.read_bytes())
    data[len(data) // 2] ^= 0xFF
    pack.write_bytes(bytes(data))
    code, result = run_backup(cli, config)
    assert code == 0 and result["status"] == "ok"
    (warning,) = result["warnings"]
    assert warning["code"] == "backup-copy-failed" and warning["severity"] == "warning"
    assert "failed verification" in warning["message"] and str(second_disk) in warning["message"]
    assert "\n" not in warning["message"]
    # The new local checkpoint stands; the copy that did not verify is not kept as if it did.
    assert result["checkpoint"] in {
        info.name for info in catalog.list_folder(sample.state_dir / "backups")
    }
    assert result["checkpoint"] not in {info.name for info in catalog.list_folder(second_disk)}


def test_a_symlink_in_the_copy_folder_is_never_followed(sample, cli, tmp_path, second_disk):
    outside = tmp_path / "outside"
    outside.mkdir()
    (second_disk / "store").symlink_to(outside)
    config = write_config(tmp_path, copy_to=str(second_disk))
    code, result = run_backup(cli, config)
    assert code == 0
    assert [w["code"] for w in result["warnings"]] == ["backup-copy-failed"]
    assert "symlink" in result["warnings"][0]["message"]
    assert list(outside.iterdir()) == []


def test_a_missing_target_is_a_warning_and_is_never_created(sample, cli, tmp_path):
    unmounted = tmp_path / "not-mounted" / "backups"
    config = write_config(tmp_path, copy_to=str(unmounted))
    code, result = run_backup(cli, config)
    assert code == 0 and result["checkpoint"]
    assert [w["code"] for w in result["warnings"]] == ["backup-copy-failed"]
    assert "does not exist" in result["warnings"][0]["message"]
    assert not unmounted.parent.exists()


def test_a_dry_run_says_what_it_would_copy_and_writes_nothing(sample, cli, tmp_path, second_disk):
    config = write_config(tmp_path, copy_to=str(second_disk), copy_keep=1)
    assert run_backup(cli, config)[0] == 0
    before_copy, before_backups = tree(second_disk), tree(sample.state_dir / "backups")
    code, result = run_backup(cli, config, "--dry-run")
    assert code == 0 and result["changes"]["checkpoints_copied"] == 1
    plan = result["stats"]["would_copy"]
    assert plan["target"] == str(second_disk) and plan["name"] == result["stats"]["would_create"]
    assert plan["would_remove"] == [info.name for info in catalog.list_folder(second_disk)]
    text = cli("--config", str(config), "run", "backup", "--dry-run").stdout
    assert f"-> {second_disk}" in text
    assert tree(second_disk) == before_copy
    assert tree(sample.state_dir / "backups") == before_backups


@pytest.mark.heavy
@pytest.mark.parametrize("tool", ["rsync", "rclone"])
def test_a_target_whose_tool_is_missing_is_refused_in_one_line(sample, cli, tmp_path, tool):
    config = write_config(tmp_path, copy_to=f"{tool}:backup-host:/srv/mnemo")
    empty_path = tmp_path / "empty-bin"
    empty_path.mkdir()
    for args in (("run", "backup", "--dry-run"), ("run", "backup")):
        completed = cli("--config", str(config), *args, env={"PATH": str(empty_path)})
        assert completed.returncode == 2, completed.stdout + completed.stderr
        message = (completed.stdout + completed.stderr).strip().splitlines()
        assert any(f"needs {tool}, which is not on PATH" in line for line in message), message
    assert catalog.list_folder(sample.state_dir / "backups") == []  # refused before any write


def test_an_ill_formed_target_is_a_config_error_naming_the_key(sample, cli, tmp_path):
    config = write_config(tmp_path, copy_to="relative/folder")
    completed = cli("--config", str(config), "run", "backup")
    assert completed.returncode == 2
    assert "copy_to" in completed.stdout + completed.stderr


STAND_IN_RSYNC = """#!{python}
# A stand-in for rsync (not installed here): copies like `rsync --recursive` would, and before
# that asks the real writer lock, with flock(1), whether anyone holds it.
import os, shutil, subprocess, sys
arguments = [a for a in sys.argv[1:] if not a.startswith("-")]
source, destination = arguments[-2], arguments[-1].split(":", 1)[-1]
if "--dry-run" in sys.argv:
    sys.exit(0)
free = subprocess.run(["flock", "--nonblock", {lock!r}, "true"]).returncode == 0
with open({record!r}, "a") as record:
    record.write("free\\n" if free else "held\\n")
shutil.copytree(source, destination, dirs_exist_ok=True)
"""


@pytest.mark.skipif(shutil.which("flock") is None, reason="flock(1) is not installed")
def test_the_writer_lock_is_not_held_while_copying(sample, cli, tmp_path):
    settings_lock = lock_path_for(sample.state_dir, sample.db_path)
    record = tmp_path / "lock-during-copy.txt"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "rsync"
    stand_in.write_text(
        STAND_IN_RSYNC.format(python=sys.executable, lock=str(settings_lock), record=str(record))
    )
    stand_in.chmod(0o700)
    target = tmp_path / "remote"
    target.mkdir()
    config = write_config(tmp_path, copy_to=f"rsync:localhost:{target}")
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    completed = cli("--config", str(config), "--json", "run", "backup", env={"PATH": path})
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert record.read_text() == "free\n"  # the copy ran; the lock was not held meanwhile
    assert json.loads(completed.stdout)["stats"]["copy"]["verified"] is True
    # The lock file is the one the job took: a backup without a copy holds it throughout.
    assert settings_lock.exists()


@pytest.mark.skipif(shutil.which("rsync") is None, reason="rsync is not installed")
def test_a_real_rsync_copy_verifies(sample, cli, tmp_path, second_disk):
    config = write_config(tmp_path, copy_to=f"rsync:{second_disk}")
    code, result = run_backup(cli, config)
    assert code == 0 and result["warnings"] == [], result
    (info,) = catalog.list_folder(second_disk)
    assert verify_checkpoint(info).ok
