"""The layering check of ``make test``: no import cycles, and each package imports only downward.

Every ``import`` / ``from ... import`` of a ``kafkatier`` module counts, wherever it stands:
inside functions and under ``if TYPE_CHECKING:`` too, since a cycle kept alive by a lazy or a
type-only import is still a cycle in the design. ``from pkg import module`` imports both the
module and ``pkg`` (its ``__init__`` runs first). Three rules, each printed as one line per
fault with the file and line of an import that breaks it:

1. no cycle between modules;
2. no cycle between the parts of any package (its modules and subpackages, each subpackage
   counted as one part), so every package can be read bottom-up;
3. the top-level packages form layers, each importing only those below it:
   ``cli`` -> ``serve`` (the Kafka protocol) -> ``sink`` (the Spark side) -> ``tiering`` ->
   ``storage``.

Usage: ``python .ci/check_imports.py [ROOT]`` (default: the checkout holding this file); exit 0
when all hold, 1 otherwise.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

NAMESPACE = "kafkatier"
LAYERS = ("cli", "serve", "sink", "tiering", "storage")
"""Top-level packages from the top down; each may import only the ones after it."""


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    where: str  # file:line of the import


def module_files(root: Path) -> dict[str, Path]:
    """Module name -> file, for every .py below the layer folders (``__init__`` as the package)."""
    found: dict[str, Path] = {}
    for top in LAYERS:
        for path in sorted((root / top).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((NAMESPACE, *parts))] = path
    return found


def imports_of(path: Path, module: str, known: set[str]) -> Iterator[tuple[str, int]]:
    """The kafkatier modules ``module`` imports, with the line of each import."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _known(alias.name, known, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                if candidate in known:  # ``from pkg import module`` runs pkg/__init__ too
                    yield from _known(candidate, known, node.lineno)
                yield from _known(base, known, node.lineno)


def _known(name: str, known: set[str], line: int) -> Iterator[tuple[str, int]]:
    while name and name not in known:  # import a.b.c of a module binds a.b.c
        name = name.rpartition(".")[0]
    if name:
        yield name, line


def module_edges(root: Path) -> list[Edge]:
    files = module_files(root)
    known = set(files)
    edges: dict[Edge, None] = {}  # ordered, one per import line and target
    for module, path in files.items():
        rel = path.relative_to(root)
        for target, line in imports_of(path, module, known):
            if target != module:
                edges[Edge(module, target, f"{rel}:{line}")] = None
    return list(edges)


def cycles(nodes: set[str], edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for e in edges:
        succ[e.source].append(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(succ[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(succ[child])))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def part_of(module: str, package: str) -> str | None:
    """The direct part of ``package`` (module or subpackage) that holds ``module``, if any."""
    if not module.startswith(package + "."):
        return None
    return package + "." + module[len(package) + 1 :].split(".")[0]


def problems(root: Path) -> list[str]:
    edges = module_edges(root)
    modules = set(module_files(root))
    out = []
    for component in cycles(modules, edges):
        out.append(_cycle_line("import cycle between modules", component, edges))
    packages = {m for m, p in module_files(root).items() if p.name == "__init__.py"}
    for package in sorted(packages | {NAMESPACE}):
        parts = {e for e in (part_of(m, package) for m in modules) if e is not None}

        def part(module: str, package: str = package) -> str | None:
            return part_of(module, package)

        lifted = [
            Edge(a, b, e.where)
            for e in edges
            if (a := part(e.source)) and (b := part(e.target)) and a != b
        ]
        for component in cycles(parts, lifted):
            where = f"import cycle between the parts of {package}"
            out.append(_cycle_line(where, component, lifted))
    rank = {f"{NAMESPACE}.{name}": i for i, name in enumerate(LAYERS)}
    for e in edges:
        a, b = part_of(e.source, NAMESPACE), part_of(e.target, NAMESPACE)
        if a and b and a != b and rank[a] > rank[b]:
            out.append(
                f"{e.where}: {e.source} imports {e.target}, but {a} is a lower layer than {b} "
                f"(layers from the top: {' -> '.join(LAYERS)})"
            )
    return out


def _cycle_line(what: str, component: list[str], edges: list[Edge]) -> str:
    inside = set(component)
    via = sorted({f"{e.source} -> {e.target} ({e.where})" for e in edges
                  if e.source in inside and e.target in inside})  # fmt: skip
    return f"{what}: {', '.join(component)}; imports: {'; '.join(via)}"


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1]
    found = problems(root)
    for line in found:
        print(line, file=sys.stderr)
    if found:
        print(f"check_imports: {len(found)} layering problem(s) under {root}", file=sys.stderr)
        return 1
    print(f"check_imports: {len(module_files(root))} modules, no cycles, layers {LAYERS} hold")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
