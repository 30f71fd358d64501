from pathlib import Path

import psutil
import pytest

from torque_async import sysinfo
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


def fake_cpu_tree(root: Path, caches: dict[int, tuple[str, str, str]], line: str = "64") -> str:
    """A sysfs cpu directory: cpu0/cache/index<i>/{level,type,size,coherency_line_size}."""
    for i, (level, kind, size) in caches.items():
        d = root / "cpu0" / "cache" / f"index{i}"
        d.mkdir(parents=True)
        for name, text in (("level", level), ("type", kind), ("size", size),
                           ("coherency_line_size", line)):
            (d / name).write_text(text + "\n")
    return str(root)


def test_cache_sizes_read_each_cache_once_in_kib(tmp_path, monkeypatch):
    root = fake_cpu_tree(tmp_path, {0: ("1", "Data", "48K"), 1: ("1", "Instruction", "32K"),
                                    2: ("2", "Unified", "2M"), 3: ("3", "Unified", "1G"),
                                    4: ("2", "Unified", "4M"), 5: ("4", "Unified", "junk")})
    monkeypatch.setattr(sysinfo, "_CPU", root)
    assert sysinfo.cache_sizes() == {"1Data": 48, "1Instruction": 32, "2Unified": 2048,
                                     "3Unified": 1 << 20}          # index4: the first one wins
    assert sysinfo.cache_line() == 64


def test_cache_line_falls_back_when_sysfs_says_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(sysinfo, "_CPU", fake_cpu_tree(tmp_path, {0: ("1", "Data", "32K")}, "0"))
    monkeypatch.setattr(sysinfo.os, "sysconf", lambda name: 128)
    assert sysinfo.cache_line() == 128
    monkeypatch.setattr(sysinfo.os, "sysconf", lambda name: 0)
    assert sysinfo.cache_line() == 64


def test_cpuinfo_keeps_cpu_0s_fields_and_the_model_comes_from_it(monkeypatch):
    text = ("processor\t: 0\nmodel name\t: First CPU\ncpu MHz\t\t: 2400.5\n\n"
            "processor\t: 1\nmodel name\t: Second CPU\ncpu MHz\t\t: 800\n")
    monkeypatch.setattr(sysinfo, "_read", lambda path, default="": text
                        if path == "/proc/cpuinfo" else default)
    fields = sysinfo._cpuinfo()
    assert fields["model name"] == "First CPU" and fields["processor"] == "0"
    assert collect().cpu_model == "First CPU"
    monkeypatch.setattr(psutil, "cpu_freq", lambda: None)
    assert sysinfo._cpu_mhz(fields) == 2400                 # no cpufreq: /proc/cpuinfo's MHz


def test_ethernet_is_the_first_nonzero_address_by_interface_name(tmp_path, monkeypatch):
    for name, mac in (("lo", "00:00:00:00:00:00"), ("eth1", "aa:bb:cc:dd:ee:02"),
                      ("eth0", "aa:bb:cc:dd:ee:01")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "address").write_text(mac + "\n")
    real_glob = sysinfo.glob.glob
    monkeypatch.setattr(sysinfo.glob, "glob", lambda pattern: real_glob(
        pattern.replace("/sys/class/net", str(tmp_path))))
    assert sysinfo._ethernet() == "aa:bb:cc:dd:ee:01"
    (tmp_path / "eth0" / "address").write_text("00:00:00:00:00:00\n")
    (tmp_path / "eth1" / "address").write_text("00:00:00:00:00:00\n")
    assert sysinfo._ethernet() == "NA"


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
