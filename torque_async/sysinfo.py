"""Machine description for the report header and the `sysctl.current` dump.

Everything comes from /sys, /proc, psutil and the standard library; a value
that cannot be read is reported as 0 or 'NA', never guessed. psutil and importlib.metadata are
imported where used: a STREAM worker reads cache_sizes() without them.
"""

from __future__ import annotations

import glob
import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path

_CPU = "/sys/devices/system/cpu"
_PACKAGES = ("numpy", "uvloop", "aiofiles", "psutil", "PyOpenGL", "click")


@dataclass(frozen=True)
class SysInfo:
    hostname: str
    machine: str
    cpu_model: str
    ethernet: str
    cpu_mhz: int
    cache_line: int
    l1d_kb: int
    l1i_kb: int
    l2_kb: int
    l3_kb: int
    mem_mb: int
    physical_cpus: int
    logical_cpus: int
    kernel: str
    # Linux's answers to torque's hw.cputype / hw.cpusubtype / hw.busfrequency ("unknown" or 0
    # where this machine does not say)
    cpu_family: str = "unknown"
    cpu_model_number: str = "unknown"
    cpu_stepping: str = "unknown"
    microcode: str = "unknown"
    memory_mts: int = 0           # configured memory speed (SMBIOS type 17), MT/s
    numa_nodes: int = 0


def _read(path: str, default: str = "") -> str:
    """Stripped contents of a (sysfs/procfs) file, or `default` if unreadable."""
    try:
        return Path(path).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return default


def _cpuinfo() -> dict[str, str]:
    """First value of each key in /proc/cpuinfo (i.e. the fields of CPU 0)."""
    fields: dict[str, str] = {}
    for line in _read("/proc/cpuinfo").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def _ethernet() -> str:
    """MAC of the first interface (by name) with a non-zero address; lo has none."""
    for address in sorted(glob.glob("/sys/class/net/*/address")):
        mac = _read(address)
        if mac and mac.strip("0:"):
            return mac
    return "NA"


def _cpu_mhz(cpuinfo: dict[str, str]) -> int:
    khz = _read(f"{_CPU}/cpu0/cpufreq/cpuinfo_max_freq")
    if khz.isdigit() and int(khz) > 0:
        return int(khz) // 1000
    import psutil
    freq = psutil.cpu_freq()
    if freq and (freq.max or freq.current):
        return int(freq.max or freq.current)
    try:
        return int(float(cpuinfo.get("cpu MHz", "0")))
    except ValueError:
        return 0


def cache_line() -> int:
    """Cache line size of CPU 0 in bytes (sysfs, else sysconf, else 64)."""
    size = _read(f"{_CPU}/cpu0/cache/index0/coherency_line_size")
    if size.isdigit() and int(size) > 0:
        return int(size)
    try:
        size = os.sysconf("SC_LEVEL1_DCACHE_LINESIZE")
    except (ValueError, OSError):
        size = 0
    return size if size > 0 else 64


def cache_sizes() -> dict[str, int]:
    """KiB per cache of CPU 0, keyed level+type: '1Data', '1Instruction', '2Unified', ..."""
    sizes: dict[str, int] = {}
    unit = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}
    for index in sorted(glob.glob(f"{_CPU}/cpu0/cache/index[0-9]*")):
        match = re.fullmatch(r"(\d+)([KMG]?)", _read(f"{index}/size"))
        if match:
            key = _read(f"{index}/level") + _read(f"{index}/type")
            sizes.setdefault(key, int(match[1]) * unit[match[2]] // 2**10)
    return sizes


DMI_MEMORY = "/sys/firmware/dmi/entries/17-*/raw"     # SMBIOS memory devices (root only)


def memory_mts() -> int:
    """The fastest configured speed (MT/s) of the memory devices SMBIOS lists; 0 when unreadable.
    A type 17 record holds the speed at 0x15 and, from SMBIOS 2.7, the configured one at 0x20."""
    speeds = []
    for entry in glob.glob(DMI_MEMORY):
        try:
            raw = Path(entry).read_bytes()
        except OSError:
            continue
        at = 0x20 if raw[1] > 0x21 else 0x15
        if raw[1] > at + 1:
            speeds.append(int.from_bytes(raw[at:at + 2], "little"))
    return max(speeds, default=0)


def numa_nodes() -> int:
    return len(glob.glob("/sys/devices/system/node/node[0-9]*"))


def collect() -> SysInfo:
    """Read the machine's description (fast: a handful of small file reads)."""
    import psutil
    cpuinfo = _cpuinfo()
    caches = cache_sizes()
    logical = psutil.cpu_count(logical=True) or 0
    uname = platform.uname()
    return SysInfo(
        hostname=uname.node,
        machine=uname.machine,
        # x86 names the model; ARM/others only give a processor or hardware line.
        cpu_model=cpuinfo.get("model name") or cpuinfo.get("Processor")
        or cpuinfo.get("Hardware") or uname.processor or "NA",
        ethernet=_ethernet(),
        cpu_mhz=_cpu_mhz(cpuinfo),
        cache_line=cache_line(),
        l1d_kb=caches.get("1Data", 0),
        l1i_kb=caches.get("1Instruction", 0),
        l2_kb=caches.get("2Unified", 0),
        l3_kb=caches.get("3Unified", 0),
        mem_mb=psutil.virtual_memory().total // 2**20,
        physical_cpus=psutil.cpu_count(logical=False) or logical,
        logical_cpus=logical,
        kernel=uname.release,
        cpu_family=cpuinfo.get("cpu family", "unknown"),
        cpu_model_number=cpuinfo.get("model", "unknown"),
        cpu_stepping=cpuinfo.get("stepping", "unknown"),
        microcode=cpuinfo.get("microcode", "unknown"),
        memory_mts=memory_mts(),
        numa_nodes=numa_nodes(),
    )


def header_lines(info: SysInfo) -> list[str]:
    """The report header's machine block, in the style of torque's man page."""
    return [
        f"hw.machine: {info.machine}",
        f"hw.model: {info.cpu_model}",
        f"hostname: {info.hostname}",
        f"Ethernet Address: {info.ethernet}",
        "",
        f"{info.cpu_mhz} hw.cpufrequency (MHz)",
        f"{info.cache_line} hw.cachelinesize (Bytes)",
        f"{info.l1i_kb} hw.l1icachesize (KByte)",
        f"{info.l1d_kb} hw.l1dcachesize (KByte)",
        f"{info.l2_kb} hw.l2cachesize (KByte)",
        f"{info.l3_kb} hw.l3cachesize (KByte)",
        f"{info.mem_mb} hw.memsize (MByte)",
        f"{info.physical_cpus} hw.physicalcpu",
        f"{info.logical_cpus} hw.logicalcpu",
        f"{info.cpu_family} hw.cpufamily",
        f"{info.cpu_model_number} hw.cpumodel",
        f"{info.cpu_stepping} hw.cpustepping",
        f"{info.microcode} hw.microcode",
        f"{info.memory_mts or 'unknown'} hw.memoryspeed (MT/s)",
        f"{info.numa_nodes or 'unknown'} hw.numanodes",
    ]


def mount_of(path: str):
    """The mount holding `path` (psutil's partition: device, mountpoint, fstype, opts), or None."""
    import psutil
    target = os.path.realpath(path)
    best = None
    for part in psutil.disk_partitions(all=True):
        mp = part.mountpoint
        inside = target == mp or target.startswith(mp.rstrip("/") + "/")
        # `>=` so that of stacked mounts on one point the last (visible) one wins.
        if inside and (best is None or len(mp) >= len(best.mountpoint)):
            best = part
    return best


def _mount_of(path: str) -> str:
    """'device on mountpoint type fstype (options)' for the mount holding `path`."""
    best = mount_of(path)
    if best is None:
        return "NA"
    return f"{best.device} on {best.mountpoint} type {best.fstype} ({best.opts})"


def _version(package: str) -> str:
    import importlib.metadata
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def detail_lines(info: SysInfo, paths: list[str]) -> list[str]:
    """The longer configuration dump written to `sysctl.current`."""
    import psutil
    cpus = sorted(glob.glob(f"{_CPU}/cpu[0-9]*"), key=lambda p: int(p.rsplit("cpu", 1)[1]))
    vm, swap = psutil.virtual_memory(), psutil.swap_memory()
    lines = header_lines(info) + ["", f"kernel: {' '.join(filter(None, platform.uname()))}"]
    for cpu in cpus:
        governor = _read(f"{cpu}/cpufreq/scaling_governor", "NA")
        lines.append(f"{os.path.basename(cpu)}.scaling_governor: {governor}")
    lines += [
        f"transparent_hugepage: {_read('/sys/kernel/mm/transparent_hugepage/enabled', 'NA')}",
        f"io_uring_disabled: {_read('/proc/sys/kernel/io_uring_disabled', 'NA')}",
        f"mem.total: {vm.total // 2**20} MByte",
        f"mem.available: {vm.available // 2**20} MByte",
        f"swap.total: {swap.total // 2**20} MByte",
    ]
    lines += [f"mount {path}: {_mount_of(path)}" for path in paths]
    lines.append(f"version python: {platform.python_version()}")
    lines += [f"version {pkg}: {_version(pkg)}" for pkg in _PACKAGES]
    return lines
