import os
import time
from pathlib import Path

import pytest

from torque_async.sysinfo import SysInfo, collect, detail_lines, header_lines

SAMPLE = SysInfo(
    hostname="box",
    machine="x86_64",
    cpu_model="Test CPU 9000",
    ethernet="00:11:22:33:44:55",
    cpu_mhz=3500,
    cache_line=64,
    l1d_kb=48,
    l1i_kb=32,
    l2_kb=2048,
    l3_kb=36864,
    mem_mb=65536,
    physical_cpus=8,
    logical_cpus=16,
    kernel="6.8.0",
)


@pytest.fixture(scope="module")
def info() -> SysInfo:
    return collect()


def test_collect_cpu_counts(info):
    assert info.logical_cpus > 0
    assert info.logical_cpus == os.cpu_count()
    assert 0 < info.physical_cpus <= info.logical_cpus


def test_collect_memory_matches_sysconf(info):
    expected = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2**20
    assert abs(info.mem_mb - expected) <= max(16, expected // 100)


def test_collect_cache_and_identity(info):
    assert info.cache_line > 0 and info.cache_line & (info.cache_line - 1) == 0
    assert info.hostname == os.uname().nodename
    assert info.machine == os.uname().machine
    assert info.kernel == os.uname().release
    assert info.ethernet == "NA" or len(info.ethernet.split(":")) == 6


def test_collect_caches_match_sysfs(info):
    indexes = sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index[0-9]*"))
    if not indexes:
        pytest.skip("sysfs does not describe CPU 0's caches here")
    size = {(i / "level").read_text().strip() + (i / "type").read_text().strip():
            (i / "size").read_text().strip() for i in indexes}
    assert f"{info.l1d_kb}K" == size["1Data"]
    assert f"{info.l2_kb}K" == size["2Unified"]
    assert info.cache_line == int((indexes[0] / "coherency_line_size").read_text())


def test_collect_is_fast():
    start = time.perf_counter()
    collect()
    assert time.perf_counter() - start < 1.0     # a handful of file reads; generous under load


def test_header_lines_exact():
    assert header_lines(SAMPLE) == [
        "hw.machine: x86_64",
        "hw.model: Test CPU 9000",
        "hostname: box",
        "Ethernet Address: 00:11:22:33:44:55",
        "",
        "3500 hw.cpufrequency (MHz)",
        "64 hw.cachelinesize (Bytes)",
        "32 hw.l1icachesize (KByte)",
        "48 hw.l1dcachesize (KByte)",
        "2048 hw.l2cachesize (KByte)",
        "36864 hw.l3cachesize (KByte)",
        "65536 hw.memsize (MByte)",
        "8 hw.physicalcpu",
        "16 hw.logicalcpu",
        "unknown hw.cpufamily",
        "unknown hw.cpumodel",
        "unknown hw.cpustepping",
        "unknown hw.microcode",
        "unknown hw.memoryspeed (MT/s)",
        "unknown hw.numanodes",
    ]


def test_detail_lines_root_mount(info):
    lines = detail_lines(info, ["/"])
    (mount,) = [line for line in lines if line.startswith("mount /: ")]
    _, on_root, rest = mount.partition(" on / type ")
    assert on_root and rest.split(" (")[0]  # mounted on '/', fstype non-empty


def test_detail_lines_contents(info, tmp_path):
    lines = detail_lines(info, [str(tmp_path)])
    assert any(line.startswith("kernel: ") and info.kernel in line for line in lines)
    assert any(line.startswith("transparent_hugepage: ") for line in lines)
    assert any(line.startswith("io_uring_disabled: ") for line in lines)
    # sysfs also lists offline CPUs, so there may be more governors than online CPUs.
    assert sum(".scaling_governor: " in line for line in lines) >= info.logical_cpus
    assert any(line.startswith(f"mount {tmp_path}: ") and " type " in line for line in lines)
    for package in ("python", "numpy", "uvloop", "aiofiles", "psutil", "PyOpenGL", "click"):
        (line,) = [x for x in lines if x.startswith(f"version {package}: ")]
        assert line.split(": ", 1)[1] not in ("", "not installed")
