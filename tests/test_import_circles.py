"""No import circle among thai_grpo's modules, counting the imports written inside functions: lint-imports sees only
the module-level graph of each subpackage, and a lazy import inside a function closes a circle just as well."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "thai_grpo"


def module_name(path: Path, root: Path) -> str:
    """``thai_grpo.methods.grpo`` for ``thai_grpo/methods/grpo.py``; a package is named by its ``__init__``'s folder."""
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every dotted name an import statement anywhere in ``tree`` brings in (``from a import b`` gives ``a.b``, which
    is a module when ``b`` is one); relative imports resolved against ``module``."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, *([base] if base else [])])
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, at module level or inside any function."""
    paths = {module_name(path, root): path for path in sorted(root.rglob("*.py"))}
    graph = {}
    for module, path in paths.items():
        names = imported_names(ast.parse(path.read_text(encoding="utf-8")), module, path.name == "__init__.py")
        graph[module] = {name for name in names if name in paths and name != module}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` as [a, b, ..., a], or None (depth-first search, grey/black marking)."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                return stack[stack.index(target):] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_package_has_no_import_circle_counting_imports_inside_functions():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_an_import_inside_a_function_closes_a_circle(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("def plan():\n    from pkg.settings import CHECK\n")
    (package / "settings.py").write_text("def check():\n    from pkg import plan\n")
    (package / "leaf.py").write_text("from . import settings\n")
    graph = import_graph(package)
    assert graph["pkg.leaf"] == {"pkg", "pkg.settings"}  # from . import settings runs pkg/__init__ first
    assert find_cycle(graph) == ["pkg", "pkg.settings", "pkg"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
