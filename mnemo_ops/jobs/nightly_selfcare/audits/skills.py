"""Skill inventory: ``$HERMES_HOME/skills/**/SKILL.md``, each with YAML frontmatter naming the skill.

A skill file starts with a ``---`` line, YAML (read with safe_load) holding at least ``name`` and
``description`` strings, and a closing ``---`` line. Symlinks are never followed.
"""

from __future__ import annotations

import os
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import yaml

from mnemo_ops.jobs.nightly_selfcare.audits.outcome import AuditOutcome
from mnemo_ops.settings import Settings

CODE_PREFIXES = ("skill-",)
REQUIRED_FIELDS = ("name", "description")


def find_skill_files(skills_dir: Path) -> list[Path]:
    """Every SKILL.md below `skills_dir`, without descending into symlinked folders."""
    found = []
    for directory, folders, files in os.walk(skills_dir, followlinks=False):
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        if "SKILL.md" in files and not os.path.islink(os.path.join(directory, "SKILL.md")):
            found.append(Path(directory) / "SKILL.md")
    return sorted(found)


def read_frontmatter(text: str) -> tuple[dict | None, str | None]:
    """(frontmatter mapping, None) or (None, the problem) for a skill file's text."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return None, "no frontmatter (the file must start with a '---' line)"
    try:
        end = next(index for index in range(1, len(lines)) if lines[index].strip() == "---")
    except StopIteration:
        return None, "frontmatter is not closed by a '---' line"
    try:
        data = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        return None, f"frontmatter is not valid YAML{f' at line {mark.line + 2}' if mark else ''}"
    if not isinstance(data, dict):
        return None, "frontmatter is not a mapping"
    missing = [
        field
        for field in REQUIRED_FIELDS
        if not isinstance(data.get(field), str) or not data[field].strip()
    ]
    if missing:
        return None, f"frontmatter lacks {', '.join(missing)}"
    return data, None


def audit(settings: Settings, now: datetime) -> AuditOutcome:
    """Count the skills, and flag missing or invalid frontmatter and duplicate names."""
    outcome = AuditOutcome("skills")
    skills_dir = settings.hermes_home / "skills"
    if not skills_dir.is_dir() or skills_dir.is_symlink():
        outcome.stats["count"] = 0
        outcome.warn("skill-folder-missing", "info", f"no skills folder at {skills_dir}")
        return outcome
    by_name: dict[str, list[Path]] = defaultdict(list)
    files = find_skill_files(skills_dir)
    valid = 0
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            outcome.warn(
                "skill-unreadable", "warning", f"cannot read {path}: {error}", fix=f"ls -l {path}"
            )
            continue
        data, problem = read_frontmatter(text)
        if problem:
            code = (
                "skill-frontmatter-missing"
                if problem.startswith("no frontmatter")
                else "skill-frontmatter-invalid"
            )
            outcome.warn(code, "warning", f"{path}: {problem}", fix=f"$EDITOR {path}")
            continue
        valid += 1
        by_name[data["name"].strip()].append(path)
    for name, paths in sorted(by_name.items()):
        if len(paths) > 1:
            where = ", ".join(str(path.parent.relative_to(skills_dir)) for path in paths)
            outcome.warn(
                "skill-duplicate-name",
                "warning",
                f"skill name {name!r} is used by {len(paths)} skills: {where}",
                fix=f"$EDITOR {paths[1]}",
            )
    outcome.stats.update({"count": len(files), "valid": valid, "names": len(by_name)})
    return outcome
