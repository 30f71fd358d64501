"""tools/bench_timer.py's -cyclic method runs the worker's measure on the real Meter."""
import importlib.util
from pathlib import Path


def test_cyclic_method_keeps_each_wakeup():
    path = Path(__file__).resolve().parents[1] / "tools" / "bench_timer.py"
    spec = importlib.util.spec_from_file_location("bench_timer", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    late = bench.cyclic(1000, 5)
    assert len(late) == 5 and (late >= 0).all()
