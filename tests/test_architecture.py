"""The layering of ``mnemo_ops`` (docs/architecture.md, "Layers"): imports only run downward.

Every import of every module is read from its source (those inside functions too), so a lazy import
cannot hide an upward edge or a cycle. Inside the domain layer the packages have a declared order
too (`DOMAIN_ORDER`): a domain package imports only the domain packages declared below it.
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
    "mnemo_ops.core.folders",
    "mnemo_ops.core.lock",
    "mnemo_ops.core.manifests",
    "mnemo_ops.core.progress",
    "mnemo_ops.core.results",
    "mnemo_ops.core.runner",
    "mnemo_ops.core.state",
)
"""The core is the job lifecycle only; a new core module must be added here on purpose."""
LAYERS = (
    ("foundation", FOUNDATION),
    ("settings", ("mnemo_ops.settings",)),
    ("memory database", ("mnemo_ops.database",)),
    ("core", LIFECYCLE),
    ("domain", None),  # every package not named in another layer
    ("jobs", ("mnemo_ops.jobs",)),
    ("command line", ("mnemo_ops.commands", "mnemo_ops.cli", "mnemo_ops.__main__")),
)


DOMAIN_ORDER = (
    # Leaves: they import no other domain package.
    "redaction",  # secrets kept out of text; under the model layer and the auth-file audit
    "memory_blocks",  # Hermes' block files as Hermes reads and writes them
    "disk",  # the free-space reserve; under checkpoints, which keep it free
    "checkpoints",  # copies of the memory: refused below the disk reserve
    "monitoring",  # the runner's monitors: a result goes out, nothing comes in
    "samples",  # homes written through Mnemosyne's API, for the demo, tests and benchmarks
    "canonical",
    "linking",
    "integrity",
    "bridge",
    "scheduling",  # the schedulers' files; under selfcare, whose report shows the schedule
    "evaluation",  # recall engines and metrics; under the guard, which measures with them
    "guard",
    "models",  # the model layer: what it may send goes through redaction
    "consolidation",  # evening-batch's step runner; under the steps that run in it
    "topics",
    "reflection",  # self-reflection asks the model layer; under selfcare's "learned this week"
    "sleep",  # the sleep stages: consolidation's steps, evaluation's engines, the model layer
    "selfcare",  # the audits and the report read most of the packages above
    "block_migration",  # keeps a block's copy in selfcare's quarantine, verifies with the guard
)
"""The domain packages from lowest to highest, read off the import graph; a domain package imports
only packages declared below it, and a new package is placed here on purpose."""


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


def layer_of(module: str) -> int:
    """The index in LAYERS of the layer holding `module` (the longest matching prefix wins)."""
    best, best_length = None, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes or ():
            exact_only = prefix == "mnemo_ops" or prefix in LIFECYCLE
            matches = module == prefix or (not exact_only and module.startswith(prefix + "."))
            if matches and len(prefix) > best_length:
                best, best_length = index, len(prefix)
    if best is None:
        return next(index for index, (_, prefixes) in enumerate(LAYERS) if prefixes is None)
    return best


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Edges from a lower layer to a higher one, plus the special rules, as readable lines."""
    problems = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            if layer_of(target) > layer_of(module):
                problems.append(
                    f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} "
                    f"({LAYERS[layer_of(target)][0]})"
                )
            is_job_module = module.startswith("mnemo_ops.jobs.")
            if is_job_module and target == "mnemo_ops.core.runner":
                problems.append(
                    f"{module} imports the runner: a job uses its context, not the runner"
                )
    return problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Import cycles between modules, and between domain packages (each as its path of names)."""
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
    domain = layer_of("mnemo_ops.anything")

    def package(module: str) -> str:
        return ".".join(module.split(".")[:2])

    packages: dict[str, set[str]] = {}
    for module, targets in graph.items():
        if layer_of(module) != domain:
            continue
        for target in targets:
            if layer_of(target) == domain and package(target) != package(module):
                packages.setdefault(package(module), set()).add(package(target))
    search(packages)
    return found


def domain_package(module: str) -> str | None:
    """The domain package holding `module` (``sleep`` for ``mnemo_ops.sleep.nrem``), None outside it."""
    if layer_of(module) != layer_of("mnemo_ops.anything"):
        return None
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def against_domain_order(graph: dict[str, set[str]]) -> list[str]:
    """Imports from one domain package to another not declared below it, as readable lines."""
    problems = []
    for module, targets in sorted(graph.items()):
        source = domain_package(module)
        if source is None:
            continue
        if source not in DOMAIN_ORDER:
            problems.append(f"{module}: the package {source} is not declared in DOMAIN_ORDER")
            continue
        for target in sorted(targets):
            destination = domain_package(target)
            if destination is None or destination == source:
                continue
            if destination not in DOMAIN_ORDER:
                problems.append(
                    f"{target}: the package {destination} is not declared in DOMAIN_ORDER"
                )
            elif DOMAIN_ORDER.index(destination) > DOMAIN_ORDER.index(source):
                problems.append(
                    f"{module} ({source}) imports {target} ({destination}, declared above it)"
                )
    return sorted(set(problems))


def test_imports_run_only_downward():
    assert upward_imports(import_graph()) == []


def test_there_are_no_import_cycles():
    assert cycles(import_graph()) == []


def test_core_holds_the_job_lifecycle_only():
    core = {name for name in import_graph() if name.startswith("mnemo_ops.core")}
    assert core <= set(LIFECYCLE)


def test_the_check_catches_an_upward_import_and_a_cycle():
    graph = import_graph()
    graph["mnemo_ops.core.state"] = graph["mnemo_ops.core.state"] | {"mnemo_ops.jobs.backup"}
    graph["mnemo_ops.jobs.backup"] = graph["mnemo_ops.jobs.backup"] | {"mnemo_ops.core.runner"}
    graph["mnemo_ops.topics.store"] = graph["mnemo_ops.topics.store"] | {"mnemo_ops.bridge.spool"}
    graph["mnemo_ops.bridge.spool"] = graph["mnemo_ops.bridge.spool"] | {"mnemo_ops.topics.changes"}
    problems = upward_imports(graph)
    assert "mnemo_ops.core.state (core) imports mnemo_ops.jobs.backup (jobs)" in problems
    assert any("mnemo_ops.jobs.backup imports the runner" in line for line in problems)
    assert any(cycle[0] in ("mnemo_ops.topics", "mnemo_ops.bridge") for cycle in cycles(graph))


def test_a_real_upward_import_in_a_file_fails(tmp_path):
    """The graph is read from source files: an upward import written into a module is seen."""
    copy = tmp_path / "mnemo_ops"
    (copy / "core").mkdir(parents=True)
    (copy / "__init__.py").write_text("")
    (copy / "core" / "__init__.py").write_text("")
    (copy / "core" / "state.py").write_text("def f():\n    from mnemo_ops.commands import run\n")
    (copy / "commands").mkdir()
    (copy / "commands" / "__init__.py").write_text("")
    (copy / "commands" / "run.py").write_text("")
    graph = import_graph(copy)
    assert upward_imports(graph) == [
        "mnemo_ops.core.state (core) imports mnemo_ops.commands.run (command line)"
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


def test_domain_packages_import_only_packages_declared_below_them():
    assert against_domain_order(import_graph()) == []


def test_every_domain_package_is_declared_once():
    packages = {domain_package(name) for name in import_graph()} - {None}
    assert sorted(packages) == sorted(DOMAIN_ORDER)
    assert len(set(DOMAIN_ORDER)) == len(DOMAIN_ORDER)


def test_the_order_check_catches_an_import_against_it_and_an_undeclared_package():
    graph = import_graph()
    graph["mnemo_ops.redaction.patterns"] = graph["mnemo_ops.redaction.patterns"] | {
        "mnemo_ops.models.layer"
    }
    graph["mnemo_ops.newcomer.thing"] = {"mnemo_ops.disk.reserve"}
    problems = against_domain_order(graph)
    assert problems == [
        "mnemo_ops.newcomer.thing: the package newcomer is not declared in DOMAIN_ORDER",
        "mnemo_ops.redaction.patterns (redaction) imports mnemo_ops.models.layer "
        "(models, declared above it)",
    ]
    # An import down the order is allowed, as is one inside a package.
    graph = import_graph()
    graph["mnemo_ops.block_migration.plan"] |= {"mnemo_ops.redaction.patterns"}
    graph["mnemo_ops.sleep.nrem"] |= {"mnemo_ops.sleep.rem"}
    assert against_domain_order(graph) == []


def test_an_import_against_the_domain_order_in_a_file_fails(tmp_path):
    """Read from source files too: a lazy import of a higher package, inside a function, is seen."""
    copy = tmp_path / "mnemo_ops"
    for package in ("disk", "checkpoints"):
        (copy / package).mkdir(parents=True)
        (copy / package / "__init__.py").write_text("")
    (copy / "__init__.py").write_text("")
    (copy / "checkpoints" / "create.py").write_text("from mnemo_ops.disk import reserve\n")
    (copy / "disk" / "reserve.py").write_text(
        "def check():\n    from mnemo_ops.checkpoints import create\n"
    )
    assert against_domain_order(import_graph(copy)) == [
        "mnemo_ops.disk.reserve (disk) imports mnemo_ops.checkpoints.create "
        "(checkpoints, declared above it)"
    ]
