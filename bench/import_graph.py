"""The import graph between the packages: who imports whom, and what is private.

The layers, lowest first: ``gojax`` (rules, features, networks, search, the
primitives games are played with) <- ``train`` <- ``eval`` <- the command line
(``eval/cli.py``). A module imports only from its own layer or those below it,
and never another package's private (``_``-prefixed) modules or names.

This reads the source (``ast``; nothing is imported, so it runs in a second) and
prints, for the packages ``gojax``, ``train`` and ``eval``:

* every edge between two packages, with how many import statements make it,
  at module level and inside functions (a lazy import is an edge all the same);
* every import of another package's private module or name;
* every import of the command-line module by a module other than itself;
* each module's size in lines, largest first.

    python bench/import_graph.py            # the report
    python bench/import_graph.py --json     # the same as one JSON object
    python bench/import_graph.py --bench    # also count bench/ and tests/ as importers

``lint-imports`` (the contracts in pyproject.toml) checks the layers in CI;
this script is the measurement behind them.
"""

from __future__ import annotations

import argparse
import ast
import json
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("gojax", "train", "eval")
LAYER = {"gojax": 0, "train": 1, "eval": 2}  # the command line sits above eval
CLI = "eval.cli"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_private(dotted: str) -> bool:
    """Whether a dotted name has a ``_``-prefixed part (dunders such as ``__version__``
    are public)."""
    return any(p.startswith("_") and not p.startswith("__") for p in dotted.split(".")[1:])


def imports_of(path: Path) -> list[tuple[str, int, bool]]:
    """``(imported dotted name, line, inside a function)`` for each name the file imports.

    ``from a.b import c`` gives ``a.b.c`` (a module or a name in ``a.b``: either way
    what the importer depends on); relative imports are resolved against the file.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
            )
            if isinstance(child, ast.Import):
                found.extend((alias.name, child.lineno, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in child.names:
                    name = base if alias.name == "*" else f"{base}.{alias.name}"
                    found.append((name, child.lineno, in_function))
            visit(child, nested)

    visit(tree, False)
    return found


def measure(importers: tuple[str, ...]) -> dict:
    edges: Counter = Counter()  # (from, to, "module" | "function") -> statements
    edge_modules: dict[tuple[str, str], set[str]] = defaultdict(set)
    private: list[dict] = []
    cli_imports: list[dict] = []
    sizes: dict[str, int] = {}
    for folder in importers:
        for path in sorted((REPO / folder).rglob("*.py")):
            here = module_name(path)
            source_package = here.split(".")[0]
            if source_package in PACKAGES:
                sizes[here] = len(path.read_text(encoding="utf-8").splitlines())
            for name, line, in_function in imports_of(path):
                target = name.split(".")[0]
                if target not in PACKAGES:
                    continue
                where = {"module": here, "line": line, "imports": name}
                if (name == CLI or name.startswith(CLI + ".")) and here != CLI:
                    cli_imports.append(where)
                if target == source_package:
                    continue
                kind = "function" if in_function else "module"
                edges[source_package, target, kind] += 1
                edge_modules[source_package, target].add(here)
                if is_private(name):
                    private.append(where)
    return {
        "edges": [
            {
                "from": a,
                "to": b,
                "module_level": edges[a, b, "module"],
                "function_level": edges[a, b, "function"],
                "upward": a in LAYER and LAYER[b] > LAYER[a],
                "importers": sorted(edge_modules[a, b]),
            }
            for a, b in sorted(edge_modules)
        ],
        "private_imports": private,
        "cli_imports": cli_imports,
        "sizes": dict(sorted(sizes.items(), key=lambda item: -item[1])),
    }


def print_report(result: dict, top: int) -> None:
    print("Edges between packages (import statements: module level + inside functions)")
    for edge in result["edges"]:
        flag = "  UPWARD" if edge["upward"] else ""
        print(
            f"  {edge['from']:>5} -> {edge['to']:<5} {edge['module_level']:>3} + "
            f"{edge['function_level']:>3}{flag}   ({len(edge['importers'])} modules)"
        )
        if edge["upward"]:
            for module in edge["importers"]:
                print(f"        {module}")
    print(f"\nPrivate names imported from another package: {len(result['private_imports'])}")
    by_module: dict[str, list[str]] = defaultdict(list)
    for item in result["private_imports"]:
        by_module[item["module"]].append(f"{item['imports']}:{item['line']}")
    for module, names in sorted(by_module.items()):
        print(f"  {module}: {', '.join(names)}")
    print(f"\nImports of the command line ({CLI}) by other modules: {len(result['cli_imports'])}")
    for item in result["cli_imports"]:
        print(f"  {item['module']}:{item['line']} {item['imports']}")
    sizes = result["sizes"]
    total = {p: sum(n for m, n in sizes.items() if m.split(".")[0] == p) for p in PACKAGES}
    print("\nLines per package: " + ", ".join(f"{p} {n:,}" for p, n in total.items()))
    print(f"Largest modules (of {len(sizes)}):")
    for module, lines in list(sizes.items())[:top]:
        print(f"  {lines:>6}  {module}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--bench", action="store_true", help="also read bench/ and tests/")
    parser.add_argument("--top", type=int, default=15, help="largest modules to list")
    args = parser.parse_args()
    importers = PACKAGES + (("bench", "tests") if args.bench else ())
    result = measure(importers)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_report(result, args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
