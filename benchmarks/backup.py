"""Benchmark: our backup against ``sqlite3 DB ".backup FILE"`` and ``mnemosyne backup``, side by side.

On a generated Mnemosyne-schema database (schema by the real mnemosyne-memory, rows by SQL; see
generate_database.py) it measures, in one run, the wall time and the peak memory (max RSS of the
child process) of:

- ours: ``mnemo-ops run backup`` (snapshot copy + integrity_check + row counts + sha256 + manifest +
  fsync + rename), and its copy phase alone (the ``copy_s`` it reports);
- the sqlite3 command-line shell's ``.backup`` (skipped with a note when the CLI is not installed:
  CI need not have it);
- ``mnemosyne backup`` (in-memory copy, SQL dump, gzip).

Every tool is run --repeat times in alternating order (the file stays in the page cache for all of
them) and the medians are compared. Printed as ratios; bare times are shown only for context.

    python benchmarks/backup.py --size-mb 500
    python benchmarks/backup.py --size-mb 100 --repeat 3 --skip-mnemosyne
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGETS = {"copy_vs_cli": 1.3, "peak_mb": 100.0, "speedup_vs_mnemosyne": 5.0}


def measure(command: list[str], env: dict[str, str] | None = None) -> dict:
    """Run `command`; return wall seconds, peak RSS in MB, exit status and stdout."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    _pid, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    stdout, stderr = process.stdout.read(), process.stderr.read()
    process.stdout.close()
    process.stderr.close()
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{command[0]} failed ({process.returncode}): {stderr.strip()[-500:]}")
    return {"wall_s": wall, "peak_mb": usage.ru_maxrss / 1024, "stdout": stdout}


def warm(path: Path) -> None:
    """Read the file once so every tool starts with it in the page cache."""
    with path.open("rb") as handle:
        while handle.read(1 << 24):
            pass


def run_ours(db: Path, work: Path) -> dict:
    state = work / "ours-state"
    shutil.rmtree(state, ignore_errors=True)
    env = dict(os.environ, HOME=str(work / "home"), HERMES_HOME=str(work / "hermes"))
    result = measure(
        [
            sys.executable,
            "-m",
            "mnemo_ops",
            "--json",
            "--db",
            str(db),
            "--state-dir",
            str(state),
            "run",
            "backup",
        ],
        env=env,
    )
    data = json.loads(result["stdout"])
    if data["status"] != "ok":
        raise SystemExit(f"our backup failed: {data['error']}")
    result.update(
        {key: data["stats"][key] for key in ("copy_s", "verify_s", "hash_s", "counts_s", "total_s")}
    )
    shutil.rmtree(state, ignore_errors=True)
    return result


def run_cli(db: Path, work: Path, sqlite3: str) -> dict:
    target = work / "cli-copy.db"
    target.unlink(missing_ok=True)
    result = measure([sqlite3, str(db), f".backup '{target}'"])
    target.unlink(missing_ok=True)
    return result


def run_mnemosyne(db: Path, work: Path) -> dict:
    out = work / "mnemosyne-backups"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    env = dict(
        os.environ,
        HOME=str(work / "home"),
        HERMES_HOME=str(work / "hermes"),
        MNEMOSYNE_DATA_DIR=str(db.parent),
    )
    executable = shutil.which("mnemosyne", path=str(Path(sys.executable).parent)) or "mnemosyne"
    result = measure([executable, "backup", str(out)], env=env)
    shutil.rmtree(out, ignore_errors=True)
    return result


def main() -> None:
    """Generate (or reuse) the database, run every tool, print the ratios against the targets."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/mnemo-ops-bench"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--skip-mnemosyne", action="store_true", help="do not run mnemosyne backup (slow)"
    )
    arguments = parser.parse_args()

    work = arguments.dir.absolute() / f"db-{arguments.size_mb}mb"
    # Generated in a child process: Linux keeps a process's peak RSS across fork+exec, so a benchmark
    # process that had grown while generating would inflate every measured child's peak memory.
    generated = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).with_name("generate_database.py")),
            "--size-mb",
            str(arguments.size_mb),
            "--dir",
            str(arguments.dir.absolute()),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    db = Path(generated.stdout.strip().splitlines()[-1])
    for sub in ("home", "hermes"):
        (work / sub).mkdir(exist_ok=True)
    sqlite3 = shutil.which("sqlite3")
    size_mb = db.stat().st_size / 1e6
    print(f"database: {db} ({size_mb:,.0f} MB), repeat {arguments.repeat}")
    if sqlite3 is None:
        print(
            "sqlite3 CLI not installed: the copy comparison is skipped (apt-get install sqlite3 to run it)"
        )
    warm(db)

    ours, cli, mnemosyne = [], [], []
    for round_number in range(arguments.repeat):
        order = [("ours", lambda: ours.append(run_ours(db, work)))]
        if sqlite3:
            order.append(("cli", lambda: cli.append(run_cli(db, work, sqlite3))))
        if round_number % 2:
            order.reverse()
        for _name, step in order:
            step()
    if not arguments.skip_mnemosyne:
        mnemosyne.append(run_mnemosyne(db, work))

    def median(rows: list[dict], key: str) -> float:
        return statistics.median(row[key] for row in rows)

    our_copy, our_wall, our_peak = (
        median(ours, "copy_s"),
        median(ours, "wall_s"),
        max(r["peak_mb"] for r in ours),
    )
    print(
        f"\nours: full run {our_wall:.2f} s (copy {our_copy:.2f} s, integrity_check+counts "
        f"{median(ours, 'verify_s'):.2f} s, sha256 {median(ours, 'hash_s'):.2f} s), peak {our_peak:.0f} MB"
    )
    report = {"size_mb": round(size_mb), "ours_peak_mb": round(our_peak, 1)}
    if cli:
        cli_wall, cli_peak = median(cli, "wall_s"), max(r["peak_mb"] for r in cli)
        print(f"sqlite3 .backup: {cli_wall:.2f} s, peak {cli_peak:.0f} MB")
        report["copy_vs_cli"] = round(our_copy / cli_wall, 2)
        report["full_run_vs_cli"] = round(our_wall / cli_wall, 2)
        report["peak_vs_cli"] = round(our_peak / cli_peak, 2)
    if mnemosyne:
        m_wall, m_peak = median(mnemosyne, "wall_s"), max(r["peak_mb"] for r in mnemosyne)
        print(f"mnemosyne backup: {m_wall:.2f} s, peak {m_peak:.0f} MB")
        report["speedup_vs_mnemosyne"] = round(m_wall / our_wall, 1)
        report["memory_vs_mnemosyne"] = round(our_peak / m_peak, 3)

    print("\nratios (target in brackets):")
    if "copy_vs_cli" in report:
        verdict = "ok" if report["copy_vs_cli"] <= TARGETS["copy_vs_cli"] else "MISSED"
        print(
            f"  copy phase / sqlite3 .backup      {report['copy_vs_cli']:>6.2f}x  [<= 1.3x]  {verdict}"
        )
        print(
            f"  full verified run / sqlite3 copy   {report['full_run_vs_cli']:>6.2f}x  (context: ours also verifies)"
        )
    verdict = "ok" if our_peak < TARGETS["peak_mb"] else "MISSED"
    print(f"  our peak memory                    {our_peak:>6.0f} MB [< 100 MB]  {verdict}")
    if "speedup_vs_mnemosyne" in report:
        verdict = (
            "ok" if report["speedup_vs_mnemosyne"] >= TARGETS["speedup_vs_mnemosyne"] else "MISSED"
        )
        print(
            f"  mnemosyne backup / ours (time)     {report['speedup_vs_mnemosyne']:>6.1f}x  [>= 5x]  {verdict}"
        )
        print(f"  our peak / mnemosyne peak          {report['memory_vs_mnemosyne']:>6.3f}x")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
