"""The house of ``mnemo_ops`` (docs/architecture.md): rooms on floors, imports only run downward.

Every import of every module is read from its source (those inside functions too), so a lazy import
cannot hide an upward edge or a cycle. A module imports its own room and the floors below it, never a
room beside it on its own floor; the job rooms (``jobs/<job>/``) share a floor in a declared order
(`JOB_ORDER`). Only the ``mnemosyne`` room imports Mnemosyne or its Hermes plugin.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mnemo_ops"

FOUNDATION = ("mnemo_ops", "mnemo_ops.foundation")
"""The package itself (its version) and the foundation folder: every module in it is foundation."""
LIFECYCLE = (
    "mnemo_ops.core",
    "mnemo_ops.core.context",
    "mnemo_ops.core.disk_reserve",
    "mnemo_ops.core.folders",
    "mnemo_ops.core.lock",
    "mnemo_ops.core.manifests",
    "mnemo_ops.core.monitoring",
    "mnemo_ops.core.monitoring.healthchecks",
    "mnemo_ops.core.monitoring.prometheus",
    "mnemo_ops.core.monitoring.syslog",
    "mnemo_ops.core.progress",
    "mnemo_ops.core.results",
    "mnemo_ops.core.runner",
    "mnemo_ops.core.state",
)
"""The core is the job lifecycle only; a new core module must be added here on purpose."""
FLOORS = (
    ("foundation", FOUNDATION),
    ("settings", ("mnemo_ops.settings",)),
    ("memory database", ("mnemo_ops.database",)),
    ("mnemosyne", ("mnemo_ops.mnemosyne",)),
    ("core", LIFECYCLE),
    (
        "services",
        (
            "mnemo_ops.checkpoints",
            "mnemo_ops.evaluation",
            "mnemo_ops.memory_blocks",
            "mnemo_ops.models",
            "mnemo_ops.scheduling",
        ),
    ),
    ("guard", ("mnemo_ops.guard",)),
    ("jobs", ("mnemo_ops.jobs",)),
    ("command line", ("mnemo_ops.cli", "mnemo_ops.__main__")),
)
"""The floors from the bottom up (docs/architecture.md): a module imports only its own room and the
floors below it. Every module sits in a declared room; a new room is placed here on purpose."""

JOB_ORDER = (
    # The jobs import none of each other, except where one job shows or keeps another's work.
    "backup",
    "bridge_drain",
    "evening_batch",
    "memory_maintain",
    "monthly_maintenance",
    "retrieval_eval",
    "self_reflection",  # under nightly-selfcare, whose morning report shows what was learned
    "nightly_selfcare",  # under memory-block-migrate, which keeps a block's copy in its quarantine
    "memory_block_migrate",
)
"""The job rooms (``jobs/<job>/``) from lowest to highest: a job room imports only job rooms declared
below it; the jobs' registry (``mnemo_ops.jobs``) is above them all and none of them imports it."""


def module_name(path: Path, root: Path = PACKAGE) -> str:
    """The dotted name of a source file under the package folder `root`."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the mnemo_ops modules it imports (a ``from X import y`` of a submodule counts as X.y)."""
    modules = {module_name(path, root): path for path in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(
                    alias.name for alias in node.names if alias.name.startswith("mnemo_ops")
                )
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(
                        package.split(".")[: len(package.split(".")) - node.level + 1] + [base]
                    )
                if not base.startswith("mnemo_ops"):
                    continue
                for alias in node.names:
                    candidate = f"{base}.{alias.name}"
                    targets.add(candidate if candidate in modules else base)
        targets.discard(name)
        graph[name] = targets
    return graph


def room_of(module: str) -> str | None:
    """The declared room holding `module` (a job's own room for ``mnemo_ops.jobs.<job>...``)."""
    best = None
    for _, prefixes in FLOORS:
        for prefix in prefixes:
            exact_only = prefix == "mnemo_ops" or (
                prefix in LIFECYCLE and prefix != "mnemo_ops.core"
            )
            matches = module == prefix or (not exact_only and module.startswith(prefix + "."))
            if matches and (best is None or len(prefix) > len(best)):
                best = prefix
    if best == "mnemo_ops.core" and module not in LIFECYCLE:
        return None
    best = {"mnemo_ops": "mnemo_ops.foundation", "mnemo_ops.__main__": "mnemo_ops.cli"}.get(
        best, best
    )
    if best in LIFECYCLE:
        return "mnemo_ops.core"
    if best == "mnemo_ops.jobs" and module != best:
        return ".".join(module.split(".")[:3])
    return best


def floor_of(module: str) -> int | None:
    """The index in FLOORS of the floor holding `module`'s room, None outside every room."""
    room = room_of(module)
    if room is None:
        return None
    if room.startswith("mnemo_ops.jobs."):
        room = "mnemo_ops.jobs"
    return next(index for index, (_, prefixes) in enumerate(FLOORS) if room in prefixes)


def floor_name(module: str) -> str:
    """The name of `module`'s floor, for messages."""
    return FLOORS[floor_of(module)][0]


def job_of(room: str) -> str | None:
    """``evening_batch`` for the room ``mnemo_ops.jobs.evening_batch``, None for other rooms."""
    parts = room.split(".")
    return parts[2] if len(parts) == 3 and parts[1] == "jobs" else None


def sideways(module: str, target: str) -> str | None:
    """The problem with an import between two rooms on one floor, None when it is allowed.

    Only the job rooms may import each other, downward in JOB_ORDER; the jobs' registry stands
    above them all (it may import a job room, none of them imports it)."""
    if floor_name(module) != "jobs":
        return f"{module} imports {target} beside it on its floor"
    source_job, target_job = job_of(room_of(module)), job_of(room_of(target))
    if source_job is None:
        return None
    if target_job is None:
        return f"{module} imports the jobs' registry {target}"
    for job in (source_job, target_job):
        if job not in JOB_ORDER:
            return f"the job room {job} is not declared in JOB_ORDER"
    if JOB_ORDER.index(target_job) > JOB_ORDER.index(source_job):
        return f"{module} ({source_job}) imports {target} ({target_job}, declared above it)"
    return None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports up a floor, beside the room on the same floor, or out of every room, as lines."""
    problems = []
    for module, targets in sorted(graph.items()):
        if room_of(module) is None:
            problems.append(f"{module} is in no declared room")
            continue
        for target in sorted(targets):
            if room_of(target) is None:
                continue  # reported as its own module
            source_room, target_room = room_of(module), room_of(target)
            if floor_of(target) > floor_of(module):
                problems.append(
                    f"{module} ({floor_name(module)}) imports {target} ({floor_name(target)})"
                )
            elif floor_of(target) == floor_of(module) and source_room != target_room:
                problem = sideways(module, target)
                if problem:
                    problems.append(problem)
            if module.startswith("mnemo_ops.jobs.") and target == "mnemo_ops.core.runner":
                problems.append(
                    f"{module} imports the runner: a job uses its context, not the runner"
                )
    return sorted(set(problems))


def room_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Room -> the other rooms it imports (the job rooms as their own rooms)."""
    rooms: dict[str, set[str]] = {}
    for module, targets in graph.items():
        source = room_of(module)
        if source is None:
            continue
        rooms.setdefault(source, set())
        for target in targets:
            if room_of(target) not in (None, source):
                rooms[source].add(room_of(target))
    return rooms


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Import cycles between modules, and between rooms (each as its path of names)."""
    found = []

    def search(edges: dict[str, set[str]]) -> None:
        state: dict[str, int] = {}
        stack: list[str] = []

        def visit(node: str) -> None:
            state[node] = 1
            stack.append(node)
            for target in sorted(edges.get(node, ())):
                if state.get(target) == 1:
                    found.append(stack[stack.index(target) :] + [target])
                elif target not in state:
                    visit(target)
            stack.pop()
            state[node] = 2

        for node in sorted(edges):
            if node not in state:
                visit(node)

    search(graph)
    search(room_graph(graph))
    return found


def house_map(graph: dict[str, set[str]]) -> dict[str, int]:
    """The house in three figures: rooms (the package's top-level rooms, the jobs as one), floors
    (the longest chain of rooms importing one another) and arrows (room-to-room imports)."""
    top: dict[str, set[str]] = {}
    for source, targets in room_graph(graph).items():
        if source == "mnemo_ops.__main__":
            source = "mnemo_ops.cli"
        source = ".".join(source.split(".")[:2])
        top.setdefault(source, set())
        for target in targets:
            target = ".".join(target.split(".")[:2])
            if target != source and target != "mnemo_ops.__main__":
                top[source].add(target)
    depth: dict[str, int] = {}

    def height(room: str) -> int:
        if room not in depth:
            depth[room] = 0  # a cycle (which test_there_are_no_import_cycles reports) ends here
            depth[room] = 1 + max((height(target) for target in top.get(room, ())), default=0)
        return depth[room]

    return {
        "rooms": len(top),
        "floors": max(height(room) for room in top),
        "arrows": sum(len(targets) for targets in top.values()),
    }


def mnemosyne_imports(root: Path = PACKAGE) -> list[str]:
    """Modules outside the ``mnemosyne`` room that import Mnemosyne or its Hermes plugin."""
    found = []
    for path in sorted(root.rglob("*.py")):
        name = module_name(path, root)
        if name == "mnemo_ops.mnemosyne" or name.startswith("mnemo_ops.mnemosyne."):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                imported = [node.module or ""]
            else:
                continue
            for target in imported:
                if target.split(".")[0] in ("mnemosyne", "mnemosyne_hermes"):
                    found.append(f"{name}:{node.lineno} imports {target}")
    return found


def test_imports_run_only_downward():
    assert upward_imports(import_graph()) == []


def test_there_are_no_import_cycles():
    assert cycles(import_graph()) == []


def test_core_holds_the_job_lifecycle_only():
    core = {name for name in import_graph() if name.startswith("mnemo_ops.core")}
    assert core <= set(LIFECYCLE)


def test_only_the_mnemosyne_room_imports_mnemosyne():
    assert mnemosyne_imports() == []


def test_the_mnemosyne_check_catches_a_lazy_import_outside_the_room(tmp_path):
    copy = tmp_path / "mnemo_ops"
    (copy / "jobs" / "backup").mkdir(parents=True)
    (copy / "mnemosyne").mkdir()
    (copy / "jobs" / "backup" / "job.py").write_text(
        "def run(ctx):\n    from mnemosyne.core.memory import Mnemosyne\n"
    )
    (copy / "mnemosyne" / "api.py").write_text(
        "import mnemosyne.core.memory\nimport mnemosyne_hermes\n"
    )
    assert mnemosyne_imports(copy) == ["mnemo_ops.jobs.backup.job:2 imports mnemosyne.core.memory"]


def test_the_house_keeps_its_shape():
    """About a dozen rooms on at most nine floors with few arrows (docs/architecture.md)."""
    shape = house_map(import_graph())
    assert shape["rooms"] <= 14
    assert shape["floors"] <= 9
    assert shape["arrows"] < 60


def test_the_check_catches_an_upward_import_a_sideways_one_and_a_cycle():
    graph = import_graph()
    graph["mnemo_ops.core.state"] |= {"mnemo_ops.jobs.backup.job"}
    graph["mnemo_ops.jobs.backup.job"] |= {"mnemo_ops.core.runner", "mnemo_ops.jobs"}
    graph["mnemo_ops.models.layer"] |= {"mnemo_ops.scheduling.crontab"}
    graph["mnemo_ops.jobs.self_reflection.run"] |= {"mnemo_ops.jobs.nightly_selfcare.report"}
    graph["mnemo_ops.jobs.evening_batch.topics.store"] |= {"mnemo_ops.jobs.bridge_drain.spool"}
    graph["mnemo_ops.jobs.bridge_drain.spool"] |= {"mnemo_ops.jobs.evening_batch.topics.changes"}
    graph["mnemo_ops.newcomer"] = {"mnemo_ops.core.results"}
    problems = upward_imports(graph)
    assert "mnemo_ops.core.state (core) imports mnemo_ops.jobs.backup.job (jobs)" in problems
    assert any("mnemo_ops.jobs.backup.job imports the runner" in line for line in problems)
    assert "mnemo_ops.jobs.backup.job imports the jobs' registry mnemo_ops.jobs" in problems
    assert (
        "mnemo_ops.models.layer imports mnemo_ops.scheduling.crontab beside it on its floor"
        in problems
    )
    assert (
        "mnemo_ops.jobs.self_reflection.run (self_reflection) imports "
        "mnemo_ops.jobs.nightly_selfcare.report (nightly_selfcare, declared above it)" in problems
    )
    assert "mnemo_ops.newcomer is in no declared room" in problems
    assert any(
        cycle[0] in ("mnemo_ops.jobs.evening_batch", "mnemo_ops.jobs.bridge_drain")
        for cycle in cycles(graph)
    )


def test_the_shape_check_counts_a_new_arrow_and_floor():
    graph = import_graph()
    before = house_map(graph)
    graph["mnemo_ops.scheduling.crontab"] = graph["mnemo_ops.scheduling.crontab"] | {
        "mnemo_ops.guard.verdict"
    }
    after = house_map(graph)
    assert after["arrows"] == before["arrows"] + 1
    assert after["floors"] > before["floors"]


def test_a_real_upward_import_in_a_file_fails(tmp_path):
    """The graph is read from source files: an upward import written into a module is seen."""
    copy = tmp_path / "mnemo_ops"
    (copy / "core").mkdir(parents=True)
    (copy / "__init__.py").write_text("")
    (copy / "core" / "__init__.py").write_text("")
    (copy / "core" / "state.py").write_text("def f():\n    from mnemo_ops.cli import run\n")
    (copy / "cli").mkdir()
    (copy / "cli" / "__init__.py").write_text("")
    (copy / "cli" / "run.py").write_text("")
    graph = import_graph(copy)
    assert upward_imports(graph) == [
        "mnemo_ops.core.state (core) imports mnemo_ops.cli.run (command line)"
    ]


def test_a_job_room_importing_one_declared_above_it_in_a_file_fails(tmp_path):
    """Read from source files too: a lazy import of a higher job room, inside a function, is seen."""
    copy = tmp_path / "mnemo_ops"
    for job in ("self_reflection", "nightly_selfcare"):
        (copy / "jobs" / job).mkdir(parents=True)
        (copy / "jobs" / job / "__init__.py").write_text("")
    (copy / "__init__.py").write_text("")
    (copy / "jobs" / "__init__.py").write_text("")
    (copy / "jobs" / "nightly_selfcare" / "report.py").write_text(
        "from mnemo_ops.jobs.self_reflection import learned\n"
    )
    (copy / "jobs" / "self_reflection" / "learned.py").write_text(
        "def week():\n    from mnemo_ops.jobs.nightly_selfcare import report\n"
    )
    assert upward_imports(import_graph(copy)) == [
        "mnemo_ops.jobs.self_reflection.learned (self_reflection) imports "
        "mnemo_ops.jobs.nightly_selfcare.report (nightly_selfcare, declared above it)"
    ]


def option_reads_by_string(root: Path = PACKAGE) -> list[str]:
    """Places outside ``settings`` that read an option by its name as text.

    Options are attributes of typed section models (``settings.backup.keep``, ``ctx.options.k``);
    a dotted-name lookup (``settings.option("backup.keep")``) or a subscript of an ``options``
    mapping (``options["k"]``) is what the models replaced: a typo there is found only at run time.
    """
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] == "settings":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path.relative_to(root.parent)}:{getattr(node, 'lineno', 0)}"
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("option", "job_option", "section")
                and any(
                    isinstance(argument, ast.Constant | ast.JoinedStr) for argument in node.args
                )
            ):
                found.append(f"{where}: .{node.func.attr}(...) by name")
            if isinstance(node, ast.Subscript) and isinstance(
                node.slice, ast.Constant | ast.JoinedStr
            ):
                target = node.value
                name = (
                    target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                )
                if name == "options" and isinstance(getattr(node.slice, "value", ""), str):
                    found.append(f"{where}: options[...] by name")
    return found


def test_no_module_outside_settings_reads_an_option_by_string():
    assert option_reads_by_string() == []


def test_the_option_check_catches_a_read_by_string(tmp_path):
    copy = tmp_path / "mnemo_ops"
    (copy / "jobs").mkdir(parents=True)
    (copy / "jobs" / "backup.py").write_text(
        "def run(ctx):\n    ctx.options['keep']\n    ctx.settings.option('backup.keep')\n"
    )
    (copy / "settings").mkdir()
    (copy / "settings" / "x.py").write_text("def f(options):\n    return options['keep']\n")
    assert option_reads_by_string(copy) == [
        "mnemo_ops/jobs/backup.py:2: options[...] by name",
        "mnemo_ops/jobs/backup.py:3: .option(...) by name",
    ]
