"""The graph of the project's own imports, and its circles: python3 tools/import_graph.py

Every import statement counts, at module level or inside a function (a lazy import still ties
two modules together), and so does a string naming a module ("pkg.mod" or "pkg.mod:attribute",
what kinds.py hands to importlib). Prints each circle, then each module outside the registry
that names a module of workers/; exits 1 when there is either.
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("torque_async", "workers")
REGISTRY = "torque_async.kinds"       # the one module that names workers/ (by string)
NAMED = re.compile(r"^((?:torque_async|workers)(?:\.\w+)*)(?::\w+)?$")


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Each module of the packages, by dotted name."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def target(name: str, known: dict[str, Path]) -> str | None:
    """The project module an imported name belongs to (a package's attribute: the package)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def edges(module: str, path: Path, known: dict[str, Path]) -> dict[str, set[str]]:
    """The modules this one imports, each with how: 'import' or 'by name' (a string)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: dict[str, set[str]] = {}

    def add(name: str, how: str) -> None:
        t = target(name, known)
        if t and t != module:
            found.setdefault(t, set()).add(how)

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, "import")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for alias in node.names:            # "from . import x": x may be a module
                add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base, "import")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            m = NAMED.match(node.value)
            if m:
                add(m.group(1), "by name")
    return found


def graph(root: Path = ROOT) -> dict[str, dict[str, set[str]]]:
    known = modules(root)
    return {m: edges(m, p, known) for m, p in known.items()}


def circles(g: dict[str, dict[str, set[str]]],
            follow=lambda src, dst, how: True) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted, over the
    edges follow() keeps."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w, how in g.get(v, {}).items():
            if not follow(v, w, how):
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(out)


def not_through_registry(src: str, dst: str, how: set[str]) -> bool:
    """An edge the circle check follows: all but the registry's by-name references, which
    bind late (the registry is the declared plug-in point)."""
    return not (src == REGISTRY and how == {"by name"})


def worker_reaches(g: dict[str, dict[str, set[str]]]) -> list[str]:
    """'core -> workers.x (how)' for each torque_async module other than the registry that
    names or imports a module of workers/."""
    return [f"{src} -> {dst} ({', '.join(sorted(how))})"
            for src, out in sorted(g.items()) if src.startswith("torque_async") and src != REGISTRY
            for dst, how in sorted(out.items()) if dst.split(".")[0] == "workers"]


def main() -> int:
    g = graph()
    found = circles(g, not_through_registry)
    for group in found:
        print("circle:", " ".join(group))
        for src in group:
            for dst, how in sorted(g[src].items()):
                if dst in group and not_through_registry(src, dst, how):
                    print(f"    {src} -> {dst} ({', '.join(sorted(how))})")
    reaches = worker_reaches(g)
    for line in reaches:
        print("outside the registry:", line)
    return 1 if found or reaches else 0


if __name__ == "__main__":
    sys.exit(main())
