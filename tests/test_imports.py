"""The package's own imports form no circle, and only the kind registry names workers/
(tools/import_graph.py draws the graph: every import statement, lazy ones too, and every
string naming a module)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import import_graph  # noqa: E402


def test_no_circle_among_the_packages_modules():
    g = import_graph.graph()
    assert "torque_async.supervisor" in g and "workers.entry" in g      # it read the packages
    assert import_graph.circles(g, import_graph.not_through_registry) == []


def test_only_the_kind_registry_names_workers():
    g = import_graph.graph()
    assert "workers.entry" in g[import_graph.REGISTRY]      # the registry does, by name
    assert import_graph.worker_reaches(g) == []


def plant(root: Path, files: dict[str, str]) -> None:
    """The two packages, empty but for `files` (path: text)."""
    for name, text in {"torque_async/__init__.py": "", "workers/__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_lazy_import_and_a_module_named_in_a_string_are_edges(tmp_path):
    plant(tmp_path, {
        "torque_async/a.py": "from .b import x\n",
        "torque_async/b.py": "def x():\n    from . import c\n",            # lazy
        "torque_async/c.py": "ENTRY = 'torque_async.a:main'\n",               # by name
        "torque_async/d.py": "from . import e\n",
        "torque_async/e.py": "WORKER = 'workers.w:main'\n",
        "workers/w.py": "from torque_async import d\n",
    })
    g = import_graph.graph(tmp_path)
    assert g["torque_async.b"] == {"torque_async.c": {"import"}}
    assert g["torque_async.c"] == {"torque_async.a": {"by name"}}
    assert import_graph.circles(g, import_graph.not_through_registry) == [
        ["torque_async.a", "torque_async.b", "torque_async.c"],
        ["torque_async.d", "torque_async.e", "workers.w"]]
    assert import_graph.worker_reaches(g) == ["torque_async.e -> workers.w (by name)"]


def test_the_registrys_names_bind_late_and_close_no_circle(tmp_path):
    plant(tmp_path, {
        "torque_async/kinds.py": "IMPL = 'workers.w:Test'\n",
        "torque_async/core.py": "from .kinds import IMPL\n",
        "workers/w.py": "from torque_async import core\n",
    })
    g = import_graph.graph(tmp_path)
    assert g["torque_async.kinds"] == {"workers.w": {"by name"}}
    assert import_graph.circles(g) == [["torque_async.core", "torque_async.kinds", "workers.w"]]
    assert import_graph.circles(g, import_graph.not_through_registry) == []
    assert import_graph.worker_reaches(g) == []
