"""The structure guard of issue 31 (pure and fast: ast only, nothing imported or run).

harness/'s top level stays a handful of loose modules, modules and functions stay small, and
harness's modules import each other without a cycle (imports under `if TYPE_CHECKING:` and inside
functions count: a cycle there is still two modules that each need the other). Each test reports
every offender in one message.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("harness", "spark_analysis", "agent_under_test")
MAX_LOOSE_MODULES = 6  # harness/*.py, __init__.py included
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 80


def _modules(package: str) -> list[Path]:
    return sorted(p for p in (ROOT / package).rglob("*.py") if "__pycache__" not in p.parts)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def test_harness_top_level_holds_few_loose_modules() -> None:
    loose = sorted(p.name for p in (ROOT / "harness").glob("*.py"))
    assert len(loose) <= MAX_LOOSE_MODULES, (
        f"harness/ holds {len(loose)} loose modules (at most {MAX_LOOSE_MODULES}): {', '.join(loose)}; "
        "move them into the package of their stage"
    )


def test_no_module_is_over_the_line_limit() -> None:
    over = [
        f"{p.relative_to(ROOT)} ({n} lines)"
        for pkg in PACKAGES
        for p in _modules(pkg)
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert not over, f"modules over {MAX_MODULE_LINES} lines: " + "; ".join(over)


def test_no_function_is_over_the_line_limit() -> None:
    over = []
    for pkg in PACKAGES:
        for p in _modules(pkg):
            tree = ast.parse(p.read_text(encoding="utf-8"), filename=str(p))
            for fn in _functions(tree):
                n = (fn.end_lineno or fn.lineno) - fn.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    over.append(f"{p.relative_to(ROOT)}:{fn.lineno} {fn.name} ({n} lines)")
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines: " + "; ".join(over)


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The harness modules `name` imports anywhere in its file (top level, TYPE_CHECKING, functions)."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                pkg = name.split(".") if is_package else name.split(".")[:-1]
                pkg = pkg[: len(pkg) - node.level + 1]
                base = ".".join(pkg + ([base] if base else []))
            # `from pkg import mod` imports pkg.mod when that is a module; else a name of pkg.
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        out.update(t for t in targets if t in known and t != name)
    return out


def import_graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in _modules("harness")}
    known = set(paths)
    return {name: _imports(path, name, known) for name, path in paths.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components; each component of more than one module is a cycle
    (returned as a path through it that ends where it starts)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                components.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_cycle_path(graph, comp) for comp in components]


def _cycle_path(graph: dict[str, set[str]], comp: list[str]) -> list[str]:
    """One concrete cycle inside a strongly connected component (a DFS back to its first module)."""
    members = set(comp)
    start = comp[0]
    path = [start]
    seen = {start}

    def dfs(v: str) -> bool:
        for w in sorted(graph[v] & members):
            if w == start:
                path.append(start)
                return True
            if w not in seen:
                seen.add(w)
                path.append(w)
                if dfs(w):
                    return True
                path.pop()
        return False

    dfs(start)
    return path


def test_harness_imports_have_no_cycle() -> None:
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles in harness: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The guard can fail: a made-up graph with a cycle is reported, one without is not."""
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
