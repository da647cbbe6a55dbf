"""The layers gojax <- train <- eval <- the command line, as bench/import_graph.py reads them.

``lint-imports`` (pyproject.toml's contracts) checks the layers and private modules;
these tests add what it cannot see: private names imported from another package's
public module (``from eval.value_mse import _positions``).
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import import_graph  # noqa: E402  (bench/import_graph.py)


@pytest.fixture(scope="module")
def graph():
    return import_graph.measure(import_graph.PACKAGES)


def test_no_package_imports_a_layer_above_it(graph):
    upward = [edge for edge in graph["edges"] if edge["upward"]]
    assert not upward, upward
    assert not graph["cli_imports"], graph["cli_imports"]


def test_no_private_names_across_packages(graph):
    assert not graph["private_imports"], graph["private_imports"]


def test_the_graph_reads_private_names():
    assert import_graph.is_private("gojax._board.BLACK")
    assert import_graph.is_private("eval.cli._parser")
    assert not import_graph.is_private("gojax.sgf.__version__")
    assert not import_graph.is_private("gojax.games.state_at")
