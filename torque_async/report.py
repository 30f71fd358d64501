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
    return hist_percentile(rec.hist, rec.lat_count, rec.lat_min, rec.lat_max, q)


def hist_percentile(hist, count: int, lo: int, hi: int, q: float) -> int:
    """The value under which a share q of `count` values fell, from their log histogram."""
    want, seen = q * count, 0
    for i, n in enumerate(hist):
        seen += n
        if n and seen >= want:
            return min(max(bucket_top(i), lo), hi)
    return hi


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


STREAM_HEADER = "proc,sub,Target(MB/s),BW(MB/s),Xfers,Late,LongestLate,min,avg,p99,max,Test"


def stream_lines(records, procs) -> list[str]:
    """Per sub-stream: target and achieved bandwidth, late transfers and lateness (us); with
    -sample, the stream's bandwidth in each sample interval."""
    from .streams.schedule import stages
    lines, samples = [], []
    for rec, proc in zip(records, procs):
        if not rec.subs:
            continue
        label, lookahead, _, bw = proc.group.args[:4]
        names = [s.name for s in stages(label, lookahead, 1)]
        for name, sub in zip(names, rec.subs):
            n = max(sub.transfers, 1)
            us = [sub.lo if sub.transfers else 0, sub.total // n,
                  hist_percentile(sub.hist, sub.transfers, sub.lo, sub.hi, 0.99), sub.hi]
            lines.append(", ".join([str(rec.row), name, f"{bw:.1f}",
                                    f"{mb_per_s(sub.transfers * rec.transfer_bytes, rec.elapsed):.1f}",
                                    str(sub.transfers), str(sub.late), str(sub.late_run),
                                    *(f"{v / 1000:.1f}" for v in us),
                                    f"{KINDS[proc.group.action].label} {label}"]))
        t, k = rec.start, 0
        for i, (t_end, k_end) in enumerate(rec.samples):
            samples.append(f"{rec.row}, {i}, {(t_end - rec.start) / NS_PER_MS:.1f}, {k_end - k}, "
                           f"{mb_per_s((k_end - k) * rec.transfer_bytes, t_end - t):.1f}")
            t, k = t_end, k_end
    if not lines:
        return []
    out = ["Streams: lateness = completion - deadline (us, 0 when on time)", STREAM_HEADER, *lines]
    if samples:
        out += ["", "Stream samples: bandwidth of all sub-streams in each interval",
                "proc,sample,End(ms),Xfers,BW(MB/s)", *samples]
    return out


def cyclic_lines(records, procs) -> list[str]:
    """cyclictest's summary line for each -cyclic process, in us, and its p99."""
    out = []
    for rec, proc in zip(records, procs):
        if proc.group.action == "cyclic" and rec.lat_count:
            us = [rec.lat_min, rec.last_lat, rec.lat_sum // rec.lat_count, rec.lat_max,
                  percentile(rec, 0.99)]
            out.append(f"T: {rec.row} ({rec.pid}) I:{proc.group.args[0]} C: {rec.lat_count} "
                       + " ".join(f"{name}: {v / 1000:.0f}" for name, v in
                                  zip(("Min", "Act", "Avg", "Max", "p99"), us)) + " (us)")
    return out


PACED = {"streams": ("transaction size", "configuration", "Number of processes"),
         "timer": ("configuration", "Number of processes")}


def group_lines(plan: Plan, group: Group, records, procs) -> list[str]:
    local = group.local
    mine = [(r, p) for r, p in zip(records, procs) if p.group is group]
    size = mine[0][0].transfer_bytes if mine and mine[0][0].transfer_bytes else local.size
    kind = KINDS[group.action]
    lines = [f"transaction size = {size} ({kb_text(size)}K), ({human(size)})",
             f"configuration file = {plan.config or 'none'}",
             f"number of transactions = {local.n}"]
    if kind.buffers:
        lines.append(f"Working Set = {kind.buffers} x {local.n * size / MB:g} MBytes/process")
    lines += [f"Bytes Transferred = {local.n * local.i * size / MB:g} MBytes/process",
              f"Number of processes = {len(mine)}", f"Number of iterations = {local.i}"]
    if kind.family in PACED:          # their arguments, not -n x -i, say what they do (info)
        lines = [ln for ln in lines if ln.startswith(PACED[kind.family])]
    infos = sorted({r.info for r, _ in mine if r.info})
    lines += infos
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
                  *cyclic_lines(records, procs), *checkpoint_lines(records, procs, t0)):
        lines.append(extra)
    lines += [""] + stream_lines(records, procs)
    if not plan.settings.nh:
        lines += [""] + latency_lines(records, procs)
    lines += ["", *bw]
    if failures:
        lines += ["", "INCOMPLETE: some tests failed", *failures]
    return [ln for i, ln in enumerate(lines) if ln or (i and lines[i - 1])]
