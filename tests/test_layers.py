"""The package's layers: imports point one way, form no cycle, and use no private names.

Layers, lowest first (a module may import only from its own layer or a lower one)::

    errors < _accounting < _privacy < _policy < _sql < mechanisms < _compile < backends < _plan
        < _release < _query < connection, result < admin < interfaces

Every import counts, including those inside functions (the pipeline is imported lazily so that
``import dpsql`` stays fast) and those only for type checking.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "dpsql"

LAYERS = ["errors", "_accounting", "_privacy", "_policy", "_sql",
          "mechanisms", "_compile", "backends", "_plan", "_release", "_query", "top", "admin", "interfaces"]


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _layer(module: str) -> int:
    parts = module.split(".")
    if module == "dpsql.__main__":
        return LAYERS.index("interfaces")
    if len(parts) == 1:
        return LAYERS.index("top")  # the package itself: the public API, imports lazily
    head = parts[1]
    if head in LAYERS:
        return LAYERS.index(head)
    return LAYERS.index("top")  # connection, result, __main__


def _resolve(name: str) -> str | None:
    """The dpsql module an imported name refers to (a module, or the module defining it)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> list[tuple[str, list[str], int]]:
    """(imported module, names imported from it, line) for every dpsql import of ``module``."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("dpsql"):
                    out.append((alias.name, [], node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dpsql"):
            assert node.level == 0, f"{module}: relative import"
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in MODULES:
                    out.append((full, [], node.lineno))
                else:
                    out.append((node.module, [alias.name], node.lineno))
    return out


GRAPH = {m: {_resolve(target) for target, _, _ in _imports(m)} - {None, m} for m in MODULES}


def test_no_import_cycles() -> None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(GRAPH[m]):
            if n == "dpsql" or m == "dpsql":
                continue  # the package's lazy attribute table points at everything, by design
            if state.get(n) == 1:
                cycle = stack[stack.index(n):] + [n]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(MODULES):
        if m not in state:
            visit(m)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down_the_layers(module: str) -> None:
    if module == "dpsql":
        return
    for target, _, line in _imports(module):
        resolved = _resolve(target)
        if resolved is None or resolved == "dpsql":
            continue
        assert _layer(resolved) <= _layer(module), (
            f"{module}:{line} imports {resolved} from a higher layer "
            f"({LAYERS[_layer(resolved)]} above {LAYERS[_layer(module)]})"
        )


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_names_across_modules(module: str) -> None:
    for target, names, line in _imports(module):
        for name in names:
            assert not (name.startswith("_") and not name.startswith("__")), (
                f"{module}:{line} imports private name {name} from {target}"
            )
    # module._private attribute access on an imported dpsql module
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    aliases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dpsql"):
            aliases |= {a.asname or a.name for a in node.names if f"{node.module}.{a.name}" in MODULES}
        elif isinstance(node, ast.Import):
            aliases |= {a.asname for a in node.names if a.asname and a.name.startswith("dpsql")}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases and node.attr.startswith("_") and not node.attr.startswith("__")):
            pytest.fail(f"{module}:{node.lineno} uses private name {node.value.id}.{node.attr}")


# ---------------------------------------------------------------------------------------------
# the public surface: dpsql.__all__ and two extension points; every other package is internal

PUBLIC_PACKAGES = {"mechanisms", "backends", "admin", "interfaces"}


def test_every_folder_is_a_layer_and_every_layer_a_folder() -> None:
    folders = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert folders == set(LAYERS) - {"errors", "top"}
    assert (PACKAGE / "errors.py").is_file()


def test_packages_other_than_the_public_ones_are_private() -> None:
    folders = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert {f for f in folders if not f.startswith("_")} == PUBLIC_PACKAGES


def test_the_public_surface_resolves() -> None:
    import dpsql
    from dpsql.backends import backend

    assert all(getattr(dpsql, name) is not None for name in dpsql.__all__)
    assert dpsql.backends.Backend is backend.Backend
    assert {n: getattr(dpsql.backends, n) for n in dpsql.backends.__all__}
    assert dpsql.mechanisms.Mechanism is dpsql.mechanisms.base.Mechanism
    with pytest.raises(AttributeError):
        dpsql.backends.Missing  # noqa: B018
