"""The report: pure functions from (plan, records, system info) to lines of text.

Times in the table are milliseconds since the start barrier's release (the earliest measured
start). BW(MB/s) counts transfer bytes; the BW: line counts system bytes (bcopy twice, STREAM
as STREAM counts), summed over the processes of each kind.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import __version__
from .kinds import KINDS
from .plan import Group, Plan, Proc
from .results import PHASES, Record, bucket_top
from .sysinfo import SysInfo, header_lines
from .units import MB, NS_PER_MS, human, kb_text, mb_per_s, per_s

TABLE_HEADER = "proc,Start,Finish,Diff,Xfers,BW(MB/s),TS(KB),IO/sec,Test,File,PID"
LATENCY_HEADER = "proc,min,avg,p50,p99,p99.9,max,Test"
LARGEST = "Largest File Size = "          # file tests: "... = 256 MBytes", one per process


@dataclass(frozen=True)
class Row:
    """One line of the table, computed from a record."""
    proc: int
    start_ms: int
    finish_ms: int
    diff_ms: int
    xfers: int
    bw: float
    ts: str
    iops: int
    test: str
    file: str
    pid: int

    def text(self) -> str:
        return (f"{self.proc}, {self.start_ms}, {self.finish_ms}, {self.diff_ms}, {self.xfers}, "
                f"{self.bw:.1f}, {self.ts}, {self.iops}, {self.test}, {self.file}, {self.pid}")


def time_zero(records: tuple[Record, ...]) -> int:
    starts = [r.start for r in records if r.start]
    return min(starts) if starts else 0


def table_row(rec: Record, proc: Proc, t0: int) -> Row:
    start, finish = (rec.start - t0) // NS_PER_MS, (rec.finish - t0) // NS_PER_MS
    return Row(rec.row, start, finish, rec.elapsed // NS_PER_MS, rec.transfers,
               mb_per_s(rec.bytes, rec.elapsed), kb_text(rec.transfer_bytes),
               int(per_s(rec.transfers, rec.elapsed)), KINDS[proc.group.action].label,
               rec.file or "NA", rec.pid)


def kind_bandwidths(records, procs) -> dict[str, float]:
    """System bandwidth (MB/s) of each test kind run, in the order the kinds first appear."""
    out: dict[str, float] = {}
    for rec, proc in zip(records, procs):
        label = KINDS[proc.group.action].label
        out[label] = out.get(label, 0.0) + mb_per_s(rec.sys_bytes, rec.elapsed)
    return out


def bw_lines(records, procs) -> list[str]:
    kinds = kind_bandwidths(records, procs)
    total = sum(kinds.values())
    return [", ".join(["BW", *kinds, "Total"]),
            ", ".join(["BW:", *(f"{v:.0f}" for v in kinds.values()), f"{total:.0f}"]),
            "", f"{total:.0f}: Total Bandwidth Consumed (MBytes/sec)"]


def overlap_line(records, t0: int) -> str:
    """The interval in which every test was measuring at once."""
    measured = [r for r in records if r.transfers]
    if len(measured) < 2:
        return ""
    lo, hi = max(r.start for r in measured), min(r.finish for r in measured)
    if hi <= lo:
        return ("Warning: the measured intervals did not all overlap; "
                "drop -fast to keep every test running until the slowest finishes")
    return (f"All {len(measured)} tests ran together from {(lo - t0) // NS_PER_MS} ms to "
            f"{(hi - t0) // NS_PER_MS} ms ({(hi - lo) // NS_PER_MS} ms)")


def percentile(rec: Record, q: float) -> int:
    """Latency (ns) under which a share q of transfers completed, from the histogram."""
    want, seen = q * rec.lat_count, 0
    for i, n in enumerate(rec.hist):
        seen += n
        if n and seen >= want:
            return min(max(bucket_top(i), rec.lat_min), rec.lat_max)
    return rec.lat_max


def latency_lines(records, procs) -> list[str]:
    lines = ["Latency per transfer (us)", LATENCY_HEADER]
    for rec, proc in zip(records, procs):
        if rec.lat_count:
            us = [rec.lat_min, rec.lat_sum // rec.lat_count, percentile(rec, 0.5),
                  percentile(rec, 0.99), percentile(rec, 0.999), rec.lat_max]
            lines.append(", ".join([str(rec.row), *(f"{v / 1000:.1f}" for v in us),
                                    KINDS[proc.group.action].label]))
    return lines if len(lines) > 2 else []


def spin_lines(records, procs) -> list[str]:
    out = []
    for rec, proc in zip(records, procs):
        if rec.ref_rate and rec.elapsed:
            rate = per_s(rec.ops, rec.elapsed)
            out.append(f"SpinWait proc {rec.row}: {rate / 1e6:.2f} Mloops/s under load, "
                       f"{rec.ref_rate / 1e6:.2f} Mloops/s alone: {100 * rate / rec.ref_rate:.1f}% "
                       f"of an idle CPU kept")
    return out


def info_lines(records) -> list[str]:
    """The lines of a group's info fields, each once, in order; of the file tests'
    "Largest File Size" lines only the largest stays."""
    lines = list(dict.fromkeys(ln for r in records for ln in r.info.splitlines() if ln))
    largest = max((ln for ln in lines if ln.startswith(LARGEST)), default=None,
                  key=lambda ln: float(ln[len(LARGEST):].split()[0]))
    return [ln for ln in lines if not ln.startswith(LARGEST) or ln == largest]


def group_lines(plan: Plan, group: Group, records, procs) -> list[str]:
    local = group.local
    mine = [(r, p) for r, p in zip(records, procs) if p.group is group]
    size = mine[0][0].transfer_bytes if mine and mine[0][0].transfer_bytes else local.size
    kind = KINDS[group.action]
    infos = info_lines([r for r, _ in mine])
    lines = [f"transaction size = {size} ({kb_text(size)}K), ({human(size)})",
             f"configuration file = {plan.config or 'none'}",
             f"number of transactions = {local.n}",
             *(ln for ln in infos if ln.startswith(LARGEST))]
    if kind.buffers:
        lines.append(f"Working Set = {kind.buffers} x {local.n * size / MB:g} MBytes/process")
    lines += [f"Bytes Transferred = {local.n * local.i * size / MB:g} MBytes/process",
              f"Number of processes = {len(mine)}", f"Number of iterations = {local.i}"]
    lines += [ln for ln in infos if not ln.startswith(LARGEST)]
    extra = sum(r.extra_transfers for r, _ in mine)
    if extra:
        lines.append(f"Unmeasured transfers while waiting for the slowest test (-slow) = {extra}")
    return lines + [group.text]


def checkpoint_lines(records, procs, t0: int) -> list[str]:
    lines = []
    for rec, proc in zip(records, procs):
        if proc.group.local.checkpoint and rec.phase[0]:
            marks = ", ".join(f"{name} {(t - t0) / NS_PER_MS:.1f}"
                              for name, t in zip(PHASES, rec.phase) if t)
            lines.append(f"checkpoint proc {rec.row} (ms since the start): {marks}")
    return lines


def render(plan: Plan, records: tuple[Record, ...], procs: tuple[Proc, ...], info: SysInfo,
           date: str, failures: tuple[str, ...] = ()) -> list[str]:
    """The whole text report; -nh drops the header, -bo keeps only the bandwidth lines."""
    t0 = time_zero(records)
    bw = bw_lines(records, procs)
    if plan.settings.bo:
        return bw
    lines: list[str] = []
    if not plan.settings.nh:
        lines += [f"torque-async, version: {__version__}", f"torque-async {plan.command}".rstrip(),
                  date, f"seed = {plan.settings.seed}", "", *header_lines(info), "",
                  "torque-async (time in ms)", f"We waited for {len(procs)} processes"]
        for group in plan.groups:
            lines += group_lines(plan, group, records, procs) + [""]
    lines.append(TABLE_HEADER)
    lines += [table_row(r, p, t0).text() for r, p in zip(records, procs) if r.transfers]
    lines += [""]
    for extra in (overlap_line(records, t0), *spin_lines(records, procs),
                  *checkpoint_lines(records, procs, t0)):
        lines.append(extra)
    if not plan.settings.nh:
        lines += [""] + latency_lines(records, procs)
    lines += ["", *bw]
    if failures:
        lines += ["", "INCOMPLETE: some tests failed", *failures]
    return [ln for i, ln in enumerate(lines) if ln or (i and lines[i - 1])]
