"""The report: pure functions from (plan, records, system info) to lines of text.

Times in the table are milliseconds since the start barrier's release (the earliest measured
start). BW(MB/s) counts transfer bytes; the BW: line counts system bytes (bcopy twice, STREAM
as STREAM counts), summed over the processes of each kind.
"""
from __future__ import annotations

import signal
from dataclasses import dataclass

from . import __version__
from .kinds import KINDS
from .plan import Group, Plan, Proc
from .results import MAX_SAMPLES, PHASES, STATE_NAMES, Record
from .stats import bucket_top
from .sysinfo import SysInfo, header_lines
from .units import MB, NS_PER_MS, human, kb_text, mb_per_s, per_s

TABLE_HEADER = "proc,Start,Finish,Diff,Xfers,BW(MB/s),TS(KB),IO/sec,Test,File,PID"
LATENCY_HEADER = "proc,min,avg,p50,p99,p99.9,max,Test"
LATENCY_QUANTILES = (("p50", 0.5), ("p99", 0.99), ("p999", 0.999))
SAMPLES_HEADER = "proc,Sample,Start,End,Xfers,BW(MB/s),Test"
SA_HEADER = "proc,Sample,BW(MB/s),Test"
STEPS = ("set-up", "barrier wait", "test", "wind-down")    # between consecutive PHASES


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


def overlap_window(records) -> tuple[int, int, int] | None:
    """(latest start, earliest finish, count) of the tests that measured, None for fewer than
    two; they all ran together only when start < finish."""
    measured = [r for r in records if r.transfers]
    if len(measured) < 2:
        return None
    return max(r.start for r in measured), min(r.finish for r in measured), len(measured)


def overlap_line(records, t0: int) -> str:
    """The interval in which every test was measuring at once."""
    window = overlap_window(records)
    if window is None:
        return ""
    lo, hi, count = window
    if hi <= lo:
        return ("Warning: the measured intervals did not all overlap; "
                "drop -fast to keep every test running until the slowest finishes")
    return (f"All {count} tests ran together from {(lo - t0) // NS_PER_MS} ms to "
            f"{(hi - t0) // NS_PER_MS} ms ({(hi - lo) // NS_PER_MS} ms)")


def latency_summary(rec: Record) -> dict[str, int] | None:
    """Latency per transfer (ns): min, avg, p50, p99, p999, max; None without transfers."""
    lat = rec.lat
    if not lat.count:
        return None
    return {"min": lat.lo, "avg": lat.avg,
            **{name: lat.percentile(q) for name, q in LATENCY_QUANTILES}, "max": lat.hi}


def latency_lines(records, procs) -> list[str]:
    lines = ["Latency per transfer (us)", LATENCY_HEADER]
    for rec, proc in zip(records, procs):
        summary = latency_summary(rec)
        if summary:
            lines.append(", ".join([str(rec.row), *(f"{v / 1000:.1f}" for v in summary.values()),
                                    KINDS[proc.group.action].label]))
    return lines if len(lines) > 2 else []


def spin_rates(rec: Record) -> dict[str, float] | None:
    """spinWait: loops/s under load and alone, and the share of the idle rate it kept."""
    if not (rec.ref_rate and rec.elapsed):
        return None
    rate = per_s(rec.ops, rec.elapsed)
    return {"loops_per_s": rate, "alone_per_s": rec.ref_rate,
            "kept_pct": 100 * rate / rec.ref_rate}


def spin_lines(records) -> list[str]:
    out = []
    for rec in records:
        spin = spin_rates(rec)
        if spin:
            out.append(f"SpinWait proc {rec.row}: {spin['loops_per_s'] / 1e6:.2f} Mloops/s under "
                       f"load, {spin['alone_per_s'] / 1e6:.2f} Mloops/s alone: "
                       f"{spin['kept_pct']:.1f}% of an idle CPU kept")
    return out


@dataclass(frozen=True)
class Interval:
    """One sample: the transfers completed since the previous sample (or the start)."""
    start: int                    # ns since time zero
    end: int
    transfers: int
    bw: float                     # MB/s of transfer bytes over this interval alone


def sampling_cut(rec: Record) -> bool:
    """Sampling stopped at the limit before the measured transfers ended."""
    return len(rec.samples) == MAX_SAMPLES and rec.samples[-1][1] < rec.transfers


def sample_intervals(rec: Record, t0: int) -> list[Interval]:
    """The intervals between consecutive samples; transfers after the last sample form a last,
    shorter interval ending at the finish (unless sampling stopped at its limit)."""
    points = list(rec.samples)
    if points and points[-1][1] < rec.transfers and not sampling_cut(rec):
        points.append((rec.finish, rec.transfers))
    out, t, k = [], rec.start, 0
    for t_end, k_end in points:
        out.append(Interval(t - t0, t_end - t0, k_end - k,
                            mb_per_s((k_end - k) * rec.transfer_bytes, t_end - t)))
        t, k = t_end, k_end
    return out


def sample_lines(records, procs, t0: int) -> list[str]:
    """One samples table for every sampled test; -sa anywhere keeps only the bandwidth."""
    sampled = [(r, p) for r, p in zip(records, procs) if r.samples]
    if not sampled:
        return []
    bw_only = any(p.group.local.sa for p in procs)
    lines = ["Samples (ms since the start; bandwidth over each interval alone)",
             SA_HEADER if bw_only else SAMPLES_HEADER]
    for rec, proc in sampled:
        label = KINDS[proc.group.action].label
        for j, s in enumerate(sample_intervals(rec, t0)):
            cols = (rec.row, j, f"{s.bw:.1f}") if bw_only else \
                (rec.row, j, f"{s.start / NS_PER_MS:.3f}", f"{s.end / NS_PER_MS:.3f}",
                 s.transfers, f"{s.bw:.1f}")
            lines.append(", ".join(map(str, (*cols, label))))
    return lines + [f"proc {rec.row}: sampling stopped at {MAX_SAMPLES} samples, after transfer "
                    f"{rec.samples[-1][1]} of {rec.transfers}"
                    for rec, _ in sampled if sampling_cut(rec)]


STREAM_HEADER = "proc,sub,Target(MB/s),BW(MB/s),Xfers,Late,LongestLate,min,avg,p99,max,Test"


def sub_stream_names(args) -> list[str]:
    """A stream's sub-streams, from its action arguments (label, lookahead, ...)."""
    from .streams.schedule import stages
    return [s.name for s in stages(args[0], args[1], 1)]


def stream_lines(records, procs) -> list[str]:
    """Per sub-stream: target and achieved bandwidth, late transfers and lateness (us).
    (With -sample, the stream's intervals are in the one samples table.)"""
    lines = []
    for rec, proc in zip(records, procs):
        if not rec.subs:
            continue
        label, _, _, bw = proc.group.args[:4]
        for name, sub in zip(sub_stream_names(proc.group.args), rec.subs):
            late = sub.lateness
            us = [late.lo, late.avg, late.percentile(0.99), late.hi]
            lines.append(", ".join([str(rec.row), name, f"{bw:.1f}",
                                    f"{mb_per_s(sub.transfers * rec.transfer_bytes, rec.elapsed):.1f}",
                                    str(sub.transfers), str(sub.late), str(sub.late_run),
                                    *(f"{v / 1000:.1f}" for v in us),
                                    f"{KINDS[proc.group.action].label} {label}"]))
    if not lines:
        return []
    return ["Streams: lateness = completion - deadline (us, 0 when on time)", STREAM_HEADER, *lines]


def cyclic_lines(records, procs) -> list[str]:
    """cyclictest's summary line for each -cyclic process, in us, and its p99."""
    out = []
    for rec, proc in zip(records, procs):
        lat = rec.lat
        if proc.group.action == "cyclic" and lat.count:
            us = [lat.lo, rec.last_lat, lat.avg, lat.hi, lat.percentile(0.99)]
            out.append(f"T: {rec.row} ({rec.pid}) I:{proc.group.args[0]} C: {rec.lat_count} "
                       + " ".join(f"{name}: {v / 1000:.0f}" for name, v in
                                  zip(("Min", "Act", "Avg", "Max", "p99"), us)) + " (us)")
    return out


PACED = {"streams": ("size", "config", "procs"),     # their arguments, not -n x -i, say what
         "timer": ("config", "procs")}                # they do (in their info lines)


def info_lines(records) -> list[str]:
    """The lines of a group's info fields, each once, in order."""
    return list(dict.fromkeys(ln for r in records for ln in r.info.splitlines() if ln))


def group_lines(plan: Plan, group: Group, records, procs) -> list[str]:
    local = group.local
    mine = [(r, p) for r, p in zip(records, procs) if p.group is group]
    size = mine[0][0].transfer_bytes if mine and mine[0][0].transfer_bytes else local.size
    kind = KINDS[group.action]
    largest = max((r.file_bytes for r, _ in mine), default=0)
    lines = {"size": f"transaction size = {size} ({kb_text(size)}K), ({human(size)})",
             "config": f"configuration file = {plan.config or 'none'}",
             "n": f"number of transactions = {local.n}",
             "largest": largest and f"Largest File Size = {largest / MB:g} MBytes",
             "working": kind.buffers and
             f"Working Set = {kind.buffers} x {local.n * size / MB:g} MBytes/process",
             "bytes": f"Bytes Transferred = {local.n * local.i * size / MB:g} MBytes/process",
             "procs": f"Number of processes = {len(mine)}",
             "iterations": f"Number of iterations = {local.i}"}
    keep = PACED.get(kind.family, lines.keys())
    lines = [text for name, text in lines.items() if name in keep and text]
    lines += info_lines([r for r, _ in mine])
    extra = sum(r.extra_transfers for r, _ in mine)
    if extra:
        lines.append(f"Unmeasured transfers while waiting for the slowest test (-slow) = {extra}")
    return lines + [group.text]


def phase_durations(rec: Record) -> dict[str, float]:
    """ms each step took: set-up, barrier wait (spinWait calibrates there), test, and wind-down
    (-slow's unmeasured transfers, the data check, clean-up); steps not reached are left out."""
    return {name: (b - a) / NS_PER_MS
            for name, a, b in zip(STEPS, rec.phase, rec.phase[1:]) if a and b}


def checkpoint_lines(records, procs, t0: int) -> list[str]:
    lines = []
    for rec, proc in zip(records, procs):
        if proc.group.local.checkpoint and rec.phase[0]:
            marks = ", ".join(f"{name} {(t - t0) / NS_PER_MS:.1f}"
                              for name, t in zip(PHASES, rec.phase) if t)
            steps = ", ".join(f"{k} {v:.1f}" for k, v in phase_durations(rec).items())
            lines += [f"checkpoint proc {rec.row} (ms since the start): {marks}",
                      f"checkpoint proc {rec.row} durations (ms): {steps}"]
    return lines


def detail_lines(records, procs, level: int) -> list[str]:
    """-v / -vl n, printed after the run: each process's raw figures and step durations (1),
    and its latency histogram (2 and up; -vl 3 also samples every transfer, see cli)."""
    lines = []
    for rec, proc in zip(records, procs):
        steps = ", ".join(f"{k} {v:.1f} ms" for k, v in phase_durations(rec).items())
        lines.append(f"proc {rec.row} (-{proc.group.action}, group {proc.group.index}, process "
                     f"{proc.index}): pid {rec.pid}, {STATE_NAMES[rec.state]}, {rec.transfers} "
                     f"transfers (+{rec.extra_transfers} unmeasured), {rec.bytes} bytes, "
                     f"{rec.sys_bytes} system bytes, {len(rec.samples)} samples; {steps}")
        if level >= 2 and rec.lat_count:
            buckets = ", ".join(f"{bucket_top(i) / 1000:g} {n}"
                                for i, n in enumerate(rec.hist) if n)
            lines.append(f"proc {rec.row} latency histogram (us at most: transfers): {buckets}")
    return lines


def render(plan: Plan, records: tuple[Record, ...], procs: tuple[Proc, ...], info: SysInfo,
           date: str, failures: tuple[str, ...] = (), interrupted: int = 0,
           unfinished: tuple[str, ...] = ()) -> list[str]:
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
    for extra in (overlap_line(records, t0), *spin_lines(records),
                  *cyclic_lines(records, procs), *checkpoint_lines(records, procs, t0)):
        lines.append(extra)
    lines += ["", *stream_lines(records, procs), "", *sample_lines(records, procs, t0)]
    if plan.settings.vl:
        lines += ["", *detail_lines(records, procs, plan.settings.vl)]
    if not plan.settings.nh:
        lines += [""] + latency_lines(records, procs)
    lines += ["", *bw]
    if interrupted:
        lines += ["", f"INTERRUPTED by {signal.Signals(interrupted).name}: the figures cover the "
                      f"transfers measured before it", *unfinished]
    if failures:
        lines += ["", "INCOMPLETE: some tests failed", *failures]
    return [ln for i, ln in enumerate(lines) if ln or (i and lines[i - 1])]
