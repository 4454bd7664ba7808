"""The architecture as the imports show it (docs/design.md, "The map"): which room may use which,
and no import cycles. Read from the source with ``ast``, so a lazy import inside a function counts
as much as one at the top of a module."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parent.parent
FOLDERS = {"ragmon": ROOT / "ragmon", "ragmon.monitor": ROOT / "monitor", "ragmon.collectors": ROOT / "collectors",
           "ragmon.exporters": ROOT / "exporters", "ragmon.alerts": ROOT / "alerts"}

# room -> the rooms its modules may import (a room is a module-name prefix; the longest one applies)
CONFIG_BASE = ("ragmon.monitor.config.section", "ragmon.monitor.config.pipeline")
ALLOWED: dict[str, tuple[str, ...]] = {
    "ragmon.monitor.core": ("ragmon.monitor.core", *CONFIG_BASE),
    "ragmon.monitor.labeling": ("ragmon.monitor.labeling", "ragmon.monitor.core", "ragmon.monitor.storage.upsert",
                                *CONFIG_BASE),
    "ragmon.monitor.storage": ("ragmon.monitor.storage", "ragmon.monitor.core"),
    "ragmon.monitor.findings": ("ragmon.monitor.findings", "ragmon.monitor.core", "ragmon.monitor.labeling.redact",
                                "ragmon.monitor.storage.upsert", "ragmon.monitor.storage.keyed_rows"),
    "ragmon.monitor.config": ("ragmon.monitor.config", "ragmon.monitor.labeling.redact",
                              "ragmon.monitor.labeling.sampling"),
    "ragmon.collectors": ("ragmon.collectors", "ragmon.monitor.core", "ragmon.monitor.config"),
    "ragmon.exporters": ("ragmon.exporters", "ragmon.monitor.core", "ragmon.monitor.config",
                         "ragmon.monitor.labeling"),
    "ragmon.alerts": ("ragmon.alerts", "ragmon.monitor.core", "ragmon.monitor.config"),
    "ragmon.monitor.app": ("ragmon",),  # the composition root and the CLI: everything
    "ragmon": ("ragmon.collectors.emitter", "ragmon.monitor.core.model"),  # the public API stays light
}


def modules() -> dict[str, Path]:
    found = {}
    for package, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            if "migrations" in path.parts:
                continue  # run by Alembic, never imported
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join((package, *parts))
            if package == "ragmon" and parts[:1] == ("__main__",):
                continue  # the command's entry point: it imports the CLI on purpose
            found[name] = path
    return found


def imports(path: Path, module: str, top_level_only: bool) -> set[str]:
    """The ragmon modules that ``module`` imports (``from x import y`` counts y when y is a module)."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in names if name == "ragmon" or name.startswith("ragmon.")}


def room_of(module: str) -> str:
    return max((room for room in ALLOWED if module == room or module.startswith(room + ".")), key=len)


def test_no_module_outside_a_known_room():
    for module in modules():
        assert room_of(module), module


def test_each_room_imports_only_what_it_may():
    everything = modules()
    wrong = []
    for module, path in everything.items():
        room = room_of(module)
        for target in imports(path, module, top_level_only=False):
            if target not in everything:
                continue  # a name imported from a module, not a module
            if not any(target == ok or target.startswith(ok + ".") for ok in ALLOWED[room]):
                wrong.append(f"{module} imports {target}")
    assert not wrong, "imports across rooms that docs/design.md does not allow:\n" + "\n".join(sorted(wrong))


def test_no_import_cycles():
    everything = modules()
    graph = {module: {t for t in imports(path, module, top_level_only=True) if t in everything and t != module}
             for module, path in everything.items()}
    cycles = []
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)
