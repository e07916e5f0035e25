"""The documentation holds together: links resolve, the README opens with its set-up commands.

- Every relative link (``[text](path)``, ``[text](path#anchor)``, ``[text](#anchor)``) in README.md,
  docs/**/*.md and benchmarks/README.md names an existing file, and an anchor names a heading of
  that file, in GitHub's slug form.
- The README's first two code blocks are the ``sh`` set-up commands: the demo command, then the
  test command, which CI runs verbatim (``.ci/run``).
- The README stays short: the manual lives in docs/.
- Every top-level command of the CLI (``mnemo_ops.cli.COMMANDS``) has a row in the README's
  command table.
- No tracked source or documentation file refers to a design document outside the repository.

Each checker is a plain function, tested on its own with broken input so that every check can fail.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README_MAX_LINES = 300
DEMO_COMMAND_END = "mnemo-ops demo"
TEST_COMMAND = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' && pytest -q"
)
SCANNED_SUFFIXES = (".py", ".md", ".toml", ".yaml", ".sql")
# Built from parts so that this file does not itself mention what it forbids.
FORBIDDEN_MENTIONS = ("DESIGN" + ".md", "../" + "shared")

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.DOTALL)
LINK = re.compile(r"!?\[([^\]]*)\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
LINK_TEXT = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto:, ...
COMMAND_ROW = re.compile(r"^\| `([a-z][a-z-]*)[ `\\]")  # | `cmd ...` |, | `cmd\|other` |


def documentation_files(root: Path = REPO) -> list[Path]:
    """README.md, every page under docs/, and benchmarks/README.md."""
    files = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    benchmarks = root / "benchmarks" / "README.md"
    if benchmarks.exists():
        files.append(benchmarks)
    return files


def prose_lines(text: str) -> list[str]:
    """The lines of `text` outside fenced code blocks (fenced lines become empty, keeping numbers)."""
    lines = []
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            lines.append("")
            continue
        lines.append("" if fenced else line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text lowercased, punctuation dropped except ``-`` (and
    ``_``, which GitHub keeps as a word character), each space turned into ``-``."""
    text = LINK_TEXT.sub(r"\1", heading).strip().lower()
    kept = "".join(character for character in text if character.isalnum() or character in "-_ ")
    return kept.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a Markdown text; a repeated slug gets ``-1``, ``-2``, ... as on GitHub."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose_lines(text):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every link outside code, fenced or inline (link text may wrap)."""
    prose = "\n".join(prose_lines(text))
    # Inline code may run over a line break: blank it out, keeping the line breaks.
    prose = INLINE_CODE.sub(lambda match: re.sub(r"[^\n]", " ", match.group(0)), prose)
    return [
        (prose.count("\n", 0, match.start()) + 1, match.group(2)) for match in LINK.finditer(prose)
    ]


def broken_links(page: Path) -> list[str]:
    """A message for every relative link of `page` that names no file, or no heading of it."""
    problems = []
    for number, target in links(page.read_text(encoding="utf-8")):
        if EXTERNAL.match(target):
            continue
        path_part, _, anchor = target.partition("#")
        destination = (page.parent / path_part).resolve() if path_part else page
        where = f"{page}:{number}: {target}"
        if not destination.exists():
            problems.append(f"{where}: no such file")
        elif anchor:
            if destination.is_dir():
                problems.append(f"{where}: an anchor on a folder")
            elif anchor not in anchors(destination.read_text(encoding="utf-8")):
                problems.append(f"{where}: no heading #{anchor} in {destination.name}")
    return problems


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced code block, in order."""
    return re.findall(r"^```([^\n]*)\n(.*?)\n```", text, re.MULTILINE | re.DOTALL)


def setup_command_problems(readme: str, ci_script: str) -> list[str]:
    """What is wrong with the README's opening: its first two code blocks must be the set-up commands."""
    blocks = code_blocks(readme)
    if len(blocks) < 2:
        return ["the README has fewer than two code blocks"]
    problems = []
    (first_language, demo), (second_language, tests) = blocks[0], blocks[1]
    if first_language.strip() != "sh" or second_language.strip() != "sh":
        problems.append("the README's first two code blocks are not sh blocks")
    if not demo.strip().endswith(DEMO_COMMAND_END):
        problems.append(f"the first command does not end with {DEMO_COMMAND_END!r}: {demo!r}")
    if tests.strip() != TEST_COMMAND:
        problems.append(f"the second command is not the test command: {tests!r}")
    if tests.strip() not in ci_script:
        problems.append("CI (.ci/run) does not run the README's test command verbatim")
    return problems


def too_long(readme: str, limit: int = README_MAX_LINES) -> bool:
    """True when the README has more than `limit` lines."""
    return len(readme.splitlines()) > limit


def table_commands(readme: str) -> set[str]:
    """The command names the README's command table has rows for (``| `cmd ...` | what |``)."""
    return {match.group(1) for line in prose_lines(readme) if (match := COMMAND_ROW.match(line))}


def undocumented_commands(readme: str, commands: list[str]) -> list[str]:
    """The commands of `commands` without a row in the README's command table, in their order."""
    documented = table_commands(readme)
    return [name for name in commands if name not in documented]


def tracked_files(root: Path = REPO) -> list[Path]:
    """The repository's tracked source and documentation files (every such file without git)."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(root), "ls-files"], capture_output=True, text=True, check=True
        ).stdout.splitlines()
        candidates = [root / name for name in listed]
    except (OSError, subprocess.CalledProcessError):
        candidates = [
            path
            for path in root.rglob("*")
            if not any(part.startswith(".venv") or part == ".git" for part in path.parts)
        ]
    return sorted(path for path in candidates if path.suffix in SCANNED_SUFFIXES and path.is_file())


def forbidden_mentions(paths: list[Path]) -> list[str]:
    """``file:line`` of every mention of a design document kept outside the repository."""
    found = []
    for path in paths:
        for number, line in enumerate(
            path.read_text(encoding="utf-8", errors="replace").splitlines(), 1
        ):
            if any(word in line for word in FORBIDDEN_MENTIONS):
                found.append(f"{path}:{number}: {line.strip()}")
    return found


# --- the repository --------------------------------------------------------------------------------


def test_the_documentation_files_are_there():
    names = {path.relative_to(REPO).as_posix() for path in documentation_files()}
    for page in (
        "docs/architecture.md",
        "docs/contracts.md",
        "docs/mnemosyne.md",
        "docs/hermes.md",
        "docs/sleep-stages.md",
        "docs/recall-guard.md",
        "docs/configuration.md",
        "docs/development.md",
        "docs/jobs/memory-maintain.md",
        "benchmarks/README.md",
    ):
        assert page in names, page


@pytest.mark.parametrize(
    "page", documentation_files(), ids=lambda path: path.relative_to(REPO).as_posix()
)
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_the_architecture_and_contracts_pages_have_the_sections_the_code_cites():
    found = anchors((REPO / "docs" / "architecture.md").read_text(encoding="utf-8"))
    for section in ("rooms", "floors", "a-night-as-data-flows", "where-to-add-a-job"):
        assert section in found, section
    found = anchors((REPO / "docs" / "contracts.md").read_text(encoding="utf-8"))
    for section in ("the-writer-lock", "results", "checkpoints-state_dirbackups"):
        assert section in found, section


def test_readme_opens_with_the_two_setup_commands_and_ci_runs_the_test_one():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    ci_script = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert setup_command_problems(readme, ci_script) == []


def test_readme_is_at_most_300_lines():
    assert not too_long((REPO / "README.md").read_text(encoding="utf-8"))


def test_every_top_level_command_has_a_row_in_the_readme_command_table():
    from mnemo_ops.cli import COMMANDS

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert undocumented_commands(readme, list(COMMANDS)) == []


def test_no_tracked_file_mentions_a_design_document_outside_the_repository():
    assert forbidden_mentions(tracked_files()) == []


# --- the checkers themselves -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        ("The writer lock", "the-writer-lock"),
        ("Why the agent's writes fail at once", "why-the-agents-writes-fail-at-once"),
        ("Checkpoints (`<state_dir>/backups/`)", "checkpoints-state_dirbackups"),
        ("Memory blocks: MEMORY.md and USER.md", "memory-blocks-memorymd-and-usermd"),
        ("5. NREM: fusing clusters", "5-nrem-fusing-clusters"),
        ("retrieval-eval and the deploy gate", "retrieval-eval-and-the-deploy-gate"),
        ("A [linked](other.md) heading", "a-linked-heading"),
        ("Two  spaces", "two--spaces"),
    ],
)
def test_slug_follows_github(heading, expected):
    assert slug(heading) == expected


def test_repeated_headings_get_numbered_anchors_and_code_is_not_a_heading():
    text = "# Title\n## Options\n```sh\n# not a heading\n```\n## Options\n"
    assert anchors(text) == {"title", "options", "options-1"}


def test_links_inside_code_are_not_links_and_link_text_may_wrap():
    text = (
        "See [a](a.md).\n`[b](b.md)` and\n```\n[c](c.md)\n```\nand `split\n[d](d.md)` end\n"
        "a [wrapped\nlink](e.md#x)\n"
    )
    assert links(text) == [(1, "a.md"), (8, "e.md#x")]


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_broken_link_checker_accepts_good_links(tmp_path):
    write(tmp_path, "docs/other.md", "# Other page\n\n## A section\n")
    page = write(
        tmp_path,
        "docs/page.md",
        "# Page\n\n[file](other.md), [anchor](other.md#a-section), [here](#page), "
        "[folder](../docs), [web](https://example.org/x#y), [mail](mailto:me@example.org)\n",
    )
    assert broken_links(page) == []


@pytest.mark.parametrize(
    ("link", "problem"),
    [
        ("missing.md", "no such file"),
        ("other.md#no-such-section", "no heading #no-such-section"),
        ("#nowhere", "no heading #nowhere"),
        ("../docs#x", "an anchor on a folder"),
    ],
)
def test_broken_link_checker_reports_broken_links(tmp_path, link, problem):
    write(tmp_path, "docs/other.md", "# Other page\n\n## A section\n")
    page = write(tmp_path, "docs/page.md", f"# Page\n\nSee [this]({link}).\n")
    problems = broken_links(page)
    assert len(problems) == 1 and problem in problems[0], problems


def test_setup_command_checker_accepts_the_commands():
    readme = (
        f"# x\n\n```sh\npip install -e . && mnemo-ops demo\n```\n\n```sh\n{TEST_COMMAND}\n```\n"
    )
    assert setup_command_problems(readme, f"(\n{TEST_COMMAND}\n)\n") == []


@pytest.mark.parametrize(
    ("readme", "ci_script", "problem"),
    [
        ("# only one\n\n```sh\nmnemo-ops demo\n```\n", TEST_COMMAND, "fewer than two"),
        (
            f"```console\nmnemo-ops demo\n```\n```sh\n{TEST_COMMAND}\n```\n",
            TEST_COMMAND,
            "not sh blocks",
        ),
        (f"```sh\nmnemo-ops run backup\n```\n```sh\n{TEST_COMMAND}\n```\n", TEST_COMMAND, "demo"),
        ("```sh\nmnemo-ops demo\n```\n```sh\npytest -q\n```\n", "pytest -q", "test command"),
        (f"```sh\nmnemo-ops demo\n```\n```sh\n{TEST_COMMAND}\n```\n", "pytest -q -n 2", "CI"),
    ],
)
def test_setup_command_checker_reports_a_wrong_opening(readme, ci_script, problem):
    problems = setup_command_problems(readme, ci_script)
    assert any(problem in message for message in problems), problems


def test_length_check():
    assert not too_long("line\n" * 300)
    assert too_long("line\n" * 301)


def test_command_table_checker_reads_rows_and_reports_a_missing_command():
    readme = (
        "| command | what |\n| --- | --- |\n| `run JOB [--dry-run]` | run one job |\n"
        "| `config schema\\|show` | the schema |\n| `report` | the report |\n"
        "Not a row: `jobs` in prose.\n```\n| `demo` | in a code block |\n```\n"
    )
    assert table_commands(readme) == {"run", "config", "report"}
    assert undocumented_commands(readme, ["run", "config", "report"]) == []
    assert undocumented_commands(readme, ["run", "jobs", "demo", "report"]) == ["jobs", "demo"]


def test_forbidden_mention_checker(tmp_path):
    clean = write(tmp_path, "clean.py", '"""See docs/mnemosyne.md."""\n')
    design = write(tmp_path, "a.md", "Background: " + FORBIDDEN_MENTIONS[0] + ".\n")
    shared = write(tmp_path, "b.py", f"# see {FORBIDDEN_MENTIONS[1]}/notes\n")
    found = forbidden_mentions([clean, design, shared])
    assert [entry.split(":")[0] for entry in found] == [str(design), str(shared)]


def test_the_install_section_installs_from_a_checkout_or_a_wheel():
    """Issue 28, item 5: `pip install mnemo-ops` fails (the package is not on the index): the README
    says how to install from a checkout or a built wheel, and names the index only as what will
    work once published."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    install = readme.split("## Install", 1)[1].split("\n## ", 1)[0]
    blocks = "\n".join(re.findall(r"```console\n(.*?)```", install, re.S))
    for command in (
        "python -m build",
        "pip install .",
        "pipx install .",
        "mnemo_ops-0.1.0-py3-none-any.whl",
    ):
        assert command in blocks, command
    # The registry name appears only in the prose, as what works once the package is published.
    assert "pip install mnemo-ops" not in blocks and "pipx install mnemo-ops" not in blocks
    assert "once it is\npublished" in install or "once it is published" in install
    assert "docker build -t mnemo-ops:latest ." in install
