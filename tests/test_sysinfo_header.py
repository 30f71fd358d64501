"""The header's Linux answers to torque's hw.cputype, hw.cpusubtype and hw.busfrequency."""
from __future__ import annotations

from torque_async import sysinfo


def smbios_17(speed: int, configured: int | None) -> bytes:
    """A memory device record: type 17, its length, and the speed words at 0x15 / 0x20."""
    length = 0x22 if configured is not None else 0x17
    raw = bytearray(length)
    raw[0], raw[1] = 17, length
    raw[0x15:0x17] = speed.to_bytes(2, "little")
    if configured is not None:
        raw[0x20:0x22] = configured.to_bytes(2, "little")
    return bytes(raw)


def test_memory_speed_is_the_configured_speed_of_the_smbios_memory_devices(tmp_path, monkeypatch):
    for i, record in enumerate((smbios_17(3200, 2933), smbios_17(2666, None))):
        (tmp_path / f"17-{i}").mkdir()
        (tmp_path / f"17-{i}" / "raw").write_bytes(record)
    monkeypatch.setattr(sysinfo, "DMI_MEMORY", str(tmp_path / "17-*" / "raw"))
    assert sysinfo.memory_mts() == 2933            # configured, not the rated 3200
    monkeypatch.setattr(sysinfo, "DMI_MEMORY", str(tmp_path / "none-*"))
    assert sysinfo.memory_mts() == 0


def test_the_header_names_family_model_stepping_microcode_memory_speed_and_nodes():
    info = sysinfo.SysInfo("h", "x86_64", "CPU", "00:00:00:00:00:01", 1, 64, 32, 32, 512, 0, 1024,
                           1, 1, "6.1", cpu_family="25", cpu_model_number="17",
                           cpu_stepping="1", microcode="0x1000065", memory_mts=0, numa_nodes=2)
    lines = sysinfo.header_lines(info)
    assert lines[-6:] == ["25 hw.cpufamily", "17 hw.cpumodel", "1 hw.cpustepping",
                          "0x1000065 hw.microcode", "unknown hw.memoryspeed (MT/s)",
                          "2 hw.numanodes"]
