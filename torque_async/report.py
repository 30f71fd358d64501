"""The report: pure functions from (plan, records, system info) to lines of text.

Times in the table are milliseconds since the start barrier's release (time zero: the earliest
"released" stamp of the parties leaving the barrier). BW(MB/s) counts transfer bytes; the BW:
line counts system bytes (bcopy twice, STREAM as STREAM counts), summed over the processes of
each group.
"""
from __future__ import annotations

import re
import signal
import statistics
from collections import Counter
from dataclasses import dataclass

from . import __version__
from .kinds import KINDS, LOOP
from .plan import Group, Plan, Proc
from .figures import CPU_WAITED, FIGURES, ONE_RUN, WITHIN_NOISE, Change, Rank, Spread
from .results import CHECKED, COUNT, FAILED, MAX_SAMPLES, PHASES, STATE_NAMES, VALUES, Record
from .rtprio import policy_text
from .stats import PERCENTILES, Stats, bucket_range, merge
from .sysinfo import SysInfo, header_lines
from .units import MB, NS_PER_MS, human, kb_text, mb_per_s, per_s
from .io import actions, files
from .io.scratch import PREFIX as SCRATCH
from .web import summary as web

TABLE_HEADER = "proc,Start,Finish,Diff,Xfers,BW(MB/s),TS(KB),IO/sec,Test,File,PID"
LATENCY_HEADER = "proc,min,avg,p50,p90,p99,p99.9,p99.99,max,Test"
PERCENTILE_LABELS = {"p50": "p50", "p90": "p90", "p99": "p99", "p999": "p99.9", "p9999": "p99.99"}
CPU_HEADER = "proc,user(ms),sys(ms),CPU%,wait%,vcsw,ivcsw,Of,Test"
SHORTEST_NS = 100_000_000          # a measured interval shorter than this is not resolved
HARNESS_SHARE = 0.1                # nor one whose harness costs more than this of a transfer
LOOP_LIMITED = 0.9                 # the loop busier than this: torque-async limited its tests
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
    """The start barrier's release: the earliest "released" stamp (each party stamps its way
    out; the loop's thread stamps the loop tests). Records without one (made by hand) fall back
    to the earliest start."""
    marks = [r.phase[2] for r in records if r.phase[2]] or [r.start for r in records if r.start]
    return min(marks) if marks else 0


def table_row(rec: Record, proc: Proc, t0: int) -> Row:
    start, finish = (rec.start - t0) // NS_PER_MS, (rec.finish - t0) // NS_PER_MS
    return Row(rec.row, start, finish, finish - start, rec.transfers,    # Diff as printed
               mb_per_s(rec.bytes, rec.elapsed), kb_text(rec.transfer_bytes),
               int(per_s(rec.transfers, rec.elapsed)), test_label(proc.group),
               rec.file or "NA", rec.pid)


def test_label(group: Group) -> str:
    """The Test column: the kind's label, with the video test's number (Video7)."""
    label = KINDS[group.action].label
    return f"{label}{group.args[0]}" if group.action == "V" else label


def group_labels(plan: Plan) -> list[str]:
    """One label per group, in plan order: the kind's, with the group's number when another
    group has the same kind (Load#0, Load#2), so the same plan always gives the same columns."""
    labels = [test_label(g) for g in plan.groups]
    return [f"{label}#{g.index}" if labels.count(label) > 1 else label
            for label, g in zip(labels, plan.groups)]


def group_bandwidths(plan: Plan, records, procs) -> dict[str, float]:
    """System bandwidth (MB/s) of each group, in plan order, under group_labels."""
    sums = [0.0] * len(plan.groups)
    for rec, proc in zip(records, procs):
        sums[proc.group.index] += mb_per_s(rec.sys_bytes, rec.elapsed)
    return dict(zip(group_labels(plan), sums))


def median_bandwidths(plan: Plan, repetitions, procs) -> tuple[dict[str, float], float]:
    """Each group's system bandwidth (group_bandwidths), the median of its repetitions' (one
    repetition: its own), and their sum: the Total adds up its columns, as in one run."""
    each = [group_bandwidths(plan, records, procs) for records in repetitions]
    groups = {name: statistics.median(g[name] for g in each) for name in each[0]}
    return groups, sum(groups.values())


def bw_lines(plan: Plan, repetitions, procs) -> list[str]:
    """The BW: line: a column per group in plan order, Total last (stable: paste many runs of
    one plan into a spreadsheet and the columns line up). `repetitions`: the records of each
    complete one (-repeat), or of the one run; of several, each column is the median of its
    repetitions' and the Total their sum."""
    groups, total = median_bandwidths(plan, repetitions, procs)
    medians = f": each group's the median of {len(repetitions)} repetitions, the Total their " \
        "sum" if len(repetitions) > 1 else ""
    return [", ".join(["BW", *groups, "Total"]),
            ", ".join(["BW:", *(f"{v:.0f}" for v in groups.values()), f"{total:.0f}"]),
            "", f"{total:.0f}: Total Bandwidth Consumed (MBytes/sec){medians}"]


def overlap_window(records) -> tuple[int, int, int] | None:
    """(latest start, earliest finish, count) of the tests that measured, None for fewer than
    two; they all ran together only when start < finish."""
    measured = [r for r in records if r.measured]
    if len(measured) < 2:
        return None
    return max(r.start for r in measured), min(r.finish for r in measured), len(measured)


def mostly_alone_lines(plan: Plan, records) -> list[str]:
    """-fast: the tests that measured more than half their time outside the interval all ran
    together (the others had finished, or not begun): their figures are mostly their own
    alone, which the Total adds to the rest as if measured together."""
    window = overlap_window(records)
    if window is None or plan.settings.slow is not False or window[1] <= window[0]:
        return []
    together = window[1] - window[0]
    return [f"proc {r.row}: {100 * (1 - together / r.elapsed):.0f}% of its measured time was "
            f"outside it (-fast: the others were not running), so its figures are mostly its "
            f"own alone" for r in records if r.measured and together < r.elapsed / 2]


def ran_span(rec: Record) -> tuple[int, int]:
    """When a test's transfers, measured or not, began and ended (its measured interval where
    the row does not say)."""
    began, ended = rec.ran
    return (began or rec.start, max(ended, rec.finish) if ended else rec.finish)


def running_lines(plan: Plan, records, t0: int, procs=()) -> str:
    """The span in which every measured test was running, measured or not, and the tests that
    ran unmeasured in it (-ramp, -slow's extra transfers) for at least a ms, for how long; ""
    when there was none. procs: every rank's processes under mpiexec (else the plan's)."""
    measured = [r for r in records if r.measured]
    spans = [ran_span(r) for r in measured]
    lo, hi = max(a for a, _ in spans), min(b for _, b in spans)
    if hi <= lo:
        return ""
    labels = {p.row: test_label(p.group) for p in procs or plan.procs()}
    alone = [(r.row, hi - lo - max(0, min(hi, r.finish) - max(lo, r.start))) for r in measured]
    alone = [(row, ns) for row, ns in alone if ns >= NS_PER_MS]
    line = (f"All {len(measured)} tests ran together from {(lo - t0) // NS_PER_MS} ms to "
            f"{(hi - t0) // NS_PER_MS} ms ({(hi - lo) // NS_PER_MS} ms)")
    if not alone:
        return line
    return f"{line}, measured or not; unmeasured in it: {unmeasured_named(alone, labels)}"


def unmeasured_named(alone: list[tuple[int, int]], labels: dict[int, str]) -> str:
    """'proc 0 (STriad) 3927 ms, ...' for each test's unmeasured ns; a test kind with more than
    3 such procs as one range ('procs 0-98 (Web) 1 to 96 ms'), so 100 clients stay one line."""
    kinds: dict[str, list[tuple[int, int]]] = {}
    for row, ns in alone:
        kinds.setdefault(labels.get(row, ""), []).append((row, ns))
    named = []
    for label, entries in kinds.items():
        shown = f" ({label})" if label else ""
        if len(entries) <= 3:
            named += [f"proc {row}{shown} {ns // NS_PER_MS} ms" for row, ns in entries]
            continue
        least, most = (f(ns for _, ns in entries) // NS_PER_MS for f in (min, max))
        named.append(f"{procs_named([row for row, _ in entries])}{shown} {least} to {most} ms")
    return ", ".join(named)


def overlap_line(plan: Plan, records, t0: int, cluster=None, procs=()) -> str:
    """The span in which every test was running (running_lines) and the interval in which
    every one was measuring at once; when there was none, advice that fits the plan that ran
    (under mpiexec: the ranks' start skew, when each rank's own tests did overlap)."""
    window = overlap_window(records)
    if window is None:
        return ""
    lo, hi, count = window
    if hi <= lo:
        skewed = cluster and cluster.skew_advice()
        advice = (skewed if skewed else
                  "drop -fast to keep every test running until the slowest finishes"
                  if plan.settings.slow is False else
                  "a test finished before another began measuring (a stream's startTime, or a "
                  "test that stopped early): lengthen the short test or start the late one sooner")
        line = f"Warning: the measured intervals did not all overlap; {advice}"
        ran = "" if cluster else running_lines(plan, records, t0)     # (ranks' clocks differ)
        return f"{line}; {ran}" if ran else line
    line = running_lines(plan, records, t0, procs)
    if "unmeasured in it" not in line:
        return line
    return (f"{line}; all measured together from {(lo - t0) // NS_PER_MS} ms to "
            f"{(hi - t0) // NS_PER_MS} ms ({(hi - lo) // NS_PER_MS} ms)")


def stats_summary(lat: Stats) -> dict[str, int] | None:
    """ns figures: min, avg, p50, p90, p99, p999, p9999, max; None without values."""
    if not lat.count:
        return None
    return {"min": lat.lo, "avg": lat.avg, **lat.percentiles(), "max": lat.hi}


def latency_summary(rec: Record) -> dict[str, int] | None:
    """Latency per transfer (ns), None without transfers."""
    return stats_summary(rec.lat)


def rates(transfers: int, size: int, elapsed: int) -> dict:
    return {"transfers": transfers, "bytes": size, "iops": per_s(transfers, elapsed),
            "mb_per_s": mb_per_s(size, elapsed)}


def part_figures(part: Stats, transfer_bytes: int, elapsed: int) -> dict:
    """The reads or the writes of a test: count, bytes, rates, latency."""
    return {**rates(part.count, part.count * transfer_bytes, elapsed),
            "latency": stats_summary(part)}


RW = ("reads", "writes")


def rw_figures(rec: Record) -> dict | None:
    """A test that mixes reads and writes: each apart; None for the others."""
    if not rec.rw:
        return None
    return {name: part_figures(part, rec.transfer_bytes, rec.elapsed)
            for name, part in zip(RW, rec.rw)}


def add_rates(parts: list[dict], merged: Stats) -> dict:
    """Figures of several processes: counts and rates summed (each over its own measured
    interval, as the BW line sums them), latency from the merged histogram."""
    return {"transfers": sum(p["transfers"] for p in parts),
            "bytes": sum(p["bytes"] for p in parts),
            "iops": sum(p["iops"] for p in parts), "mb_per_s": sum(p["mb_per_s"] for p in parts),
            "latency": stats_summary(merged)}


def group_figures(records) -> dict | None:
    """A group's summary: total IO/s and MB/s, latency percentiles of the merged histograms
    (never an average of percentiles), and reads and writes apart when its test splits them;
    None when nothing was measured."""
    measured = [r for r in records if r.measured]
    if not measured:
        return None
    out = {"processes": len(records),
           "all": add_rates([rates(r.transfers, r.bytes, r.elapsed) for r in measured],
                            merge(r.lat for r in measured))}
    split = [r for r in measured if r.rw]
    for i, name in enumerate(RW if split else ()):
        out[name] = add_rates([part_figures(r.rw[i], r.transfer_bytes, r.elapsed) for r in split],
                              merge(r.rw[i] for r in split))
    return out


def figures_text(figures: dict) -> str:
    lat = figures["latency"]
    text = f"{figures['iops']:.0f} IO/s, {figures['mb_per_s']:.1f} MB/s"
    if lat:
        text += "; latency (us) " + ", ".join(
            [*(f"p{100 * q:g} {lat[name] / 1000:.1f}" for name, q in PERCENTILES),
             f"max {lat['max'] / 1000:.1f}"])
    return text


def summary_lines(plan: Plan, records, procs) -> list[str]:
    """Each group of more than one process: its summary; each that mixes reads and writes: its
    reads and its writes."""
    lines = []
    for group in plan.groups:
        mine = [r for r, p in zip(records, procs) if p.group is group]
        figures = group_figures(mine)
        if figures is None or KINDS[group.action].grouped:      # it prints its own
            continue
        measured = sum(r.measured for r in mine)
        name = f"group {group.index} (-{group.action}, {len(mine)} " \
               f"process{'es' if len(mine) > 1 else ''}" \
               f"{f', {measured} measured' if measured < len(mine) else ''})"
        if len(mine) > 1:
            lines.append(f"{name}: {figures_text(figures['all'])}")
        lines += [f"{name} {part}: {figures_text(figures[part])}" for part in RW if part in figures]
    return lines


def per_process(proc: Proc, verbose: int) -> bool:
    """Whether the table and the latency table list this process (a grouped kind's clients
    only with -v: its group summary is the result)."""
    return verbose > 0 or not KINDS[proc.group.action].grouped


def latency_lines(records, procs) -> list[str]:
    lines = ["Latency per transfer (us)", LATENCY_HEADER]
    for rec, proc in zip(records, procs):
        summary = latency_summary(rec)
        if summary:
            lines.append(", ".join([str(rec.row), *(f"{v / 1000:.1f}" for v in summary.values()),
                                    test_label(proc.group)]))
    return [*lines, *thin_tail_lines(records)] if len(lines) > 2 else []


def thin_tail_lines(records) -> list[str]:
    """The percentiles of each row that its count cannot hold: q needs 1 / (1 - q) transfers
    for one to lie above it; with fewer it is an interpolation between the largest few and the
    max (fio prints them too, unsaid). One line: the rows by the first such percentile (every
    later one is too)."""
    first: dict[str, list[int]] = {}
    for rec in records:
        thin = [name for name, q in PERCENTILES if 0 < rec.lat.count < round(1 / (1 - q))]
        if thin:
            first.setdefault(thin[0], []).append(rec.row)
    if not first:
        return []
    parts = [f"{procs_named(rows)} from {PERCENTILE_LABELS[name]}"
             + (" up" if name != PERCENTILES[-1][0] else "") for name, rows in
             sorted(first.items(), key=lambda kv: [n for n, _ in PERCENTILES].index(kv[0]))]
    named = [n for n, _ in PERCENTILES][min([n for n, _ in PERCENTILES].index(k) for k in first):]
    needs = ", ".join(f"{PERCENTILE_LABELS[n]}: {round(1 / (1 - q))}" for n, q in PERCENTILES
                      if n in named)
    return [f"Tails not measured ({'; '.join(parts)}): a percentile q needs 1 / (1 - q) "
            f"transfers ({needs}), and with fewer it is an interpolation near the max"]


def cpu_figures(rec: Record, proc: Proc) -> dict | None:
    """CPU used over the measured interval: a spawned test's own process, a loop test's event
    loop thread (shared by every loop test); busy = that CPU time / the interval."""
    if not rec.elapsed:
        return None
    return {"of": "loop" if KINDS[proc.group.action].runs_in == LOOP else "process",
            "user": rec.cpu_user, "sys": rec.cpu_sys,
            "busy_pct": 100 * (rec.cpu_user + rec.cpu_sys) / rec.elapsed,
            "wait_pct": rec.wait_pct,
            "vcsw": rec.csw_vol, "ivcsw": rec.csw_invol}


def cpu_lines(records, procs) -> list[str]:
    loop = any(KINDS[p.group.action].runs_in == LOOP for p in procs)
    lines = ["CPU over the measured interval" + (" (a loop test's row: the event loop's thread, "
                                                 "shared by every loop test)" if loop else ""),
             CPU_HEADER]
    for rec, proc in zip(records, procs):
        cpu = cpu_figures(rec, proc)
        if cpu:
            lines.append(", ".join(map(str, (
                rec.row, f"{cpu['user'] / NS_PER_MS:.1f}", f"{cpu['sys'] / NS_PER_MS:.1f}",
                f"{cpu['busy_pct']:.0f}",
                "NA" if cpu["wait_pct"] is None else f"{cpu['wait_pct']:.0f}", cpu["vcsw"],
                cpu["ivcsw"], cpu["of"],
                test_label(proc.group)))))
    return [*lines, *double_counted_lines(records, procs)] if len(lines) > 2 else []


def double_counted_lines(records, procs) -> list[str]:
    """The rows whose CPU and wait for a CPU add up to more than their measured interval (one
    thread cannot both run and wait): the kernel counted some of the same time in both (its
    CPU clock and schedstat's run-queue wait; seen at 100-107% on a 2-CPU VM, most with many
    involuntary switches), so wait% is approximate by that much."""
    over = []
    for rec, proc in zip(records, procs):
        cpu = cpu_figures(rec, proc)
        if cpu and cpu["wait_pct"] is not None and rec.elapsed >= SHORTEST_NS and \
                cpu["busy_pct"] + cpu["wait_pct"] > 100.5:      # (a shorter one: not resolved)
            over.append((rec.row, cpu["busy_pct"] + cpu["wait_pct"]))
    if not over:
        return []
    shares = [f"{share:.0f}" for _, share in over]
    span = f"{shares[0]}%" if len(set(shares)) == 1 else \
        f"{min(shares, key=float)}-{max(shares, key=float)}%"
    return [f"{procs_named([row for row, _ in over])}: CPU% + wait% = {span} of the measured "
            f"interval: the kernel counted some time both as CPU and as a wait for one, so "
            f"CPU% and wait% are approximate by the excess"]


def no_rank(row: int) -> None:
    """The rank of a row in a run without mpiexec: none."""
    return None


def event_loops(records, procs, rank=no_rank) -> dict[tuple, list[tuple[Record, Proc]]]:
    """(rank, pid) -> the loop tests of each event loop (one per rank under mpiexec, where
    `rank` gives a row's rank) that started."""
    loops: dict[tuple, list] = {}
    for r, p in zip(records, procs):
        if r.pid and KINDS[p.group.action].runs_in == LOOP:
            loops.setdefault((rank(r.row), r.pid), []).append((r, p))
    return loops


def loop_busy(records, procs, rank=no_rank) -> dict | None:
    """How busy the busiest event loop was over its longest loop test's interval (`loops`: how
    many there were, one per rank under mpiexec; `rank`: the busiest's); busier than
    LOOP_LIMITED, the loop tests were limited by torque-async, not by the system."""
    loops = {key: [(r, p) for r, p in tests if r.elapsed]
             for key, tests in event_loops(records, procs, rank).items()}
    measured = [(where, max(tests, key=lambda rp: rp[0].elapsed))
                for (where, _), tests in loops.items() if tests]
    if not measured:
        return None
    busiest = max(({"proc": rec.row, "rank": where, "interval_ns": rec.elapsed,
                    "busy_pct": cpu_figures(rec, proc)["busy_pct"]}
                   for where, (rec, proc) in measured), key=lambda b: b["busy_pct"])
    return {**busiest, "loops": len(measured), "resolved": busiest["interval_ns"] >= SHORTEST_NS,
            "limited": busiest["busy_pct"] > 100 * LOOP_LIMITED
            and busiest["interval_ns"] >= SHORTEST_NS}


def loop_line(records, procs, rank=no_rank) -> str:
    busy = loop_busy(records, procs, rank)
    if busy is None:
        return ""
    rec, group = next((r, p.group) for r, p in zip(records, procs) if r.row == busy["proc"])
    client = f"a client of {KINDS[group.action].label} group {group.index}; " \
        if KINDS[group.action].grouped else ""     # (its row is listed only with -v)
    line = (f"Event loop: busy {busy['busy_pct']:.0f}% of proc {busy['proc']}'s measured "
            f"{busy['interval_ns'] / NS_PER_MS:.0f} ms ({client}its thread's CPU time; it ran "
            f"{policy_text(*rec.sched)})")
    if busy["loops"] > 1:
        line = (f"Event loops: {busy['loops']}, one per rank; the busiest, rank "
                f"{busy['rank']}'s:{line[len('Event loop:'):]}")
    if not busy["resolved"]:      # a few clock ticks of CPU time: no conclusion
        line += f": not resolved (< {SHORTEST_NS // NS_PER_MS} ms)"
    elif busy["limited"]:
        line += ": the loop tests were limited by torque-async, not by the system"
        if any(p.group.action == "web" for p in procs) and busy["loops"] == 1:
            line += ("; more loops serve more -web requests: run it under mpiexec -n K on this "
                     "host (each rank a loop of its own, all serving one -dir)")
        elif any(p.group.action == "web" for p in procs):   # under mpiexec already
            line += (f"; more loops serve more -web requests: more than {busy['loops']} ranks "
                     f"(mpiexec -n K), where the hosts have CPUs to spare")
    return line


def resolution_flags(rec: Record) -> dict[str, str]:
    """Why a test's figures cannot be trusted as exact: "short", a measured interval under
    SHORTEST_NS (STREAM's rule: enough clock ticks), "harness", the harness's own cost per
    transfer over HARNESS_SHARE of a transfer's time; each with its note."""
    if not rec.measured:
        return {}
    flags, per = {}, rec.elapsed / rec.transfers
    if rec.elapsed < SHORTEST_NS:
        flags["short"] = f"measured for {rec.elapsed / NS_PER_MS:.1f} ms " \
                         f"(< {SHORTEST_NS // NS_PER_MS} ms)"
    if rec.harness_ns > HARNESS_SHARE * per:
        flags["harness"] = (f"the harness's own cost, {rec.harness_ns / 1000:.2f} us per "
                            f"transfer, is {100 * rec.harness_ns / max(per, 1):.0f}% of a "
                            f"transfer's {per / 1000:.2f} us")
    return flags


def unresolved_sides(procs, alone, together) -> dict[int, str]:
    """-baseline: the rows whose figures were not resolved (resolution_flags) in a run alone
    (`alone`: each test's records there, one per repetition, in the order of `procs`) or in a
    repetition together (`together`: each one's records): where ('alone', 'together', both)."""
    sides = {"alone": {p.row for p, recs in zip(procs, alone) if any(map(resolution_flags, recs))},
             "together": {r.row for records in together for r in records if resolution_flags(r)}}
    rows = sorted(sides["alone"] | sides["together"])
    return {row: " and ".join(side for side, found in sides.items() if row in found)
            for row in rows}


def resolution_lines(records) -> list[str]:
    return [f"proc {rec.row}: {note}: its figures are not resolved"
            for rec in records for note in resolution_flags(rec).values()]


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
            kept = spin["kept_pct"]
            out.append(f"SpinWait proc {rec.row}: {spin['loops_per_s'] / 1e6:.2f} Mloops/s under "
                       f"load, {spin['alone_per_s'] / 1e6:.2f} Mloops/s alone: {kept:.1f}% of "
                       f"its rate alone kept" + (" (over 100%: the machine was busier while it "
                                                 "ran alone than during the test)"
                                                 if kept > 100 else ""))
    return out


@dataclass(frozen=True)
class Interval:
    """One sample: the transfers completed since the previous sample (or the start)."""
    start: int                    # ns since time zero
    end: int
    transfers: int
    bw: float                     # MB/s of transfer bytes over this interval alone


def data_check(rec: Record) -> dict:
    """What its data check proved (the JSON's `check`): the data's values, the count of
    transfers claimed, and why not ('why' None when both)."""
    if not rec.checked & CHECKED:
        why = "the test failed" if rec.state == FAILED else \
            "its data check did not run: the run was stopped first"
        return {"values": False, "count": False, "why": why}
    return {"values": bool(rec.checked & VALUES), "count": bool(rec.checked & COUNT),
            "why": rec.unproved or None}


def check_lines(records, procs) -> list[str]:
    """The tests whose data check did not prove their count of transfers (a failed one's error
    says why), by kind and reason."""
    said: dict[str, list[int]] = {}
    for rec, proc in zip(records, procs):
        check = data_check(rec)
        if rec.state != FAILED and not check["count"]:
            what = "the values, not" if check["values"] else "neither the values nor"
            said.setdefault(f"({KINDS[proc.group.action].label}): its data check proved {what} "
                            f"the count of transfers: {check['why']}", []).append(rec.row)
    return [f"Count not proved, {procs_named(rows)} {text}" for text, rows in said.items()]


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
    none = [f"proc {r.row}: -sample {p.group.local.sample}: no sample, as its {r.transfers} "
            f"measured transfers are fewer than {p.group.local.sample + 1}"
            for r, p in zip(records, procs) if p.group.local.sample is not None and r.measured
            and not r.samples]
    if not sampled:
        return none
    bw_only = any(p.group.local.sa for p in procs)
    lines = [f"Samples ({'' if bw_only else 'ms since the start; '}bandwidth over each "
             "interval alone)", SA_HEADER if bw_only else SAMPLES_HEADER]
    for rec, proc in sampled:
        label = KINDS[proc.group.action].label
        for j, s in enumerate(sample_intervals(rec, t0)):
            cols = (rec.row, j, f"{s.bw:.1f}") if bw_only else \
                (rec.row, j, f"{s.start / NS_PER_MS:.3f}", f"{s.end / NS_PER_MS:.3f}",
                 s.transfers, f"{s.bw:.1f}")
            lines.append(", ".join(map(str, (*cols, label))))
    return lines + [f"proc {rec.row}: sampling stopped at {MAX_SAMPLES} samples, after transfer "
                    f"{rec.samples[-1][1]} of {rec.transfers}"
                    for rec, _ in sampled if sampling_cut(rec)] + none


STREAM_HEADER = ("proc,sub,Target(MB/s),Target(fps),BW(MB/s),BW(fps),Frames,Buffer,Lost,"
                 "LateInBuffer,Dropped,LongestLost,p50(us),p99(us),max(us),Verdict,Test")
HELD, MISSED, NOT_RUN = "HELD", "MISSED", "NOT RUN"     # NOT RUN: no frame was due (a stop
                                                        # came before its first)


def sub_stream_names(args) -> list[str]:
    """A stream's sub-streams, from its action arguments (label, lookahead, ...)."""
    from .streams.schedule import stages
    return [s.name for s in stages(args[0], args[1], 1)]


@dataclass(frozen=True)
class SubStreamFigures:
    """One sub-stream as the report and the exports give it. BW is the frames moved over the
    time they span (SubStream.elapsed: N periods for N frames that held; the stream's measured
    time where that is not known); a frame is late when it completed more than -lateUs after
    its deadline, lost (`late`) when also more than its buffer's -bufferFrames periods after;
    HELD: none lost, none dropped."""
    sub: str
    target_bw: float              # MB/s
    target_fps: float
    bw: float                     # MB/s
    fps: float
    frames: int                   # frames due: moved + dropped
    late: int                     # lost: late beyond the buffer
    dropped: int
    longest_late_run: int         # consecutive frames lost or dropped
    lateness_p50: int             # ns
    lateness_p99: int
    lateness_max: int
    verdict: str
    buffer_frames: int = 0        # -bufferFrames
    late_in_buffer: int = 0       # frames late that the buffer held
    from_group: int | None = None  # -from: the group whose frames sub-stream 0 reads
    lapped: int = 0               # of the lost, overwritten by the writer before the read
    up_late: int = 0              # inherited: frames late by the upstream's lateness,
    up_lost: int = 0              # lost or dropped by it alone,
    up_max: int = 0               # the greatest inherited (ns)


def sub_stream_figures(rec: Record, proc: Proc) -> list[SubStreamFigures]:
    """A stream's sub-streams (none for other tests)."""
    if not rec.subs:
        return []
    from .streams.schedule import Geometry
    g = Geometry.of(proc.group.args, proc.group.local)
    out = []
    for name, sub in zip(sub_stream_names(proc.group.args), rec.subs):
        late, elapsed = sub.lateness, sub.elapsed or rec.elapsed
        out.append(SubStreamFigures(                 # unrounded, as every figure (the text
            name, g.bw, g.fps,                        # rounded 0.3504 to 0.35, then to 0.3)
            mb_per_s(sub.transfers * rec.transfer_bytes, elapsed),
            per_s(sub.transfers, elapsed), sub.frames, sub.late, sub.dropped,
            sub.late_run, late.percentile(0.5), late.percentile(0.99), late.hi,
            sub_verdict(sub), proc.group.local.bufferFrames or 0, sub.late_in_buffer,
            proc.group.local.from_group, sub.lapped, sub.up_late, sub.up_lost, sub.up_max))
    return out


def stream_label(proc: Proc) -> str:
    """'MemStreams rw': a stream's kind and label, its row's Test column."""
    return f"{KINDS[proc.group.action].label} {proc.group.args[0]}"


def sub_verdict(sub) -> str:
    return NOT_RUN if not sub.frames else HELD if sub.held else MISSED


def verdict_of(verdicts) -> str:
    """A stream's verdict from its sub-streams': MISSED when one missed, HELD when all held,
    else NOT RUN (a stop came first: it held nothing, missed nothing)."""
    verdicts = set(verdicts)
    return MISSED if MISSED in verdicts else HELD if verdicts == {HELD} else NOT_RUN


def stream_verdicts(records) -> list[str]:
    """Per stream process: its verdict (verdict_of its sub-streams')."""
    return [verdict_of(map(sub_verdict, rec.subs)) for rec in records if rec.subs]


def counted(verdicts: list[str]) -> str:
    """'2 held, 1 missed', and how many were not run where some were."""
    unrun = verdicts.count(NOT_RUN)
    return f"{verdicts.count(HELD)} held, {verdicts.count(MISSED)} missed" + \
        (f", {unrun} not run" if unrun else "")


def stream_lines(records, procs) -> list[str]:
    """Per sub-stream: target and achieved rate, frames late and dropped, lateness (us), the
    verdict; then one line counting the streams that held. (With -sample, the stream's
    intervals are in the one samples table.)"""
    lines = []
    for rec, proc in zip(records, procs):
        for f in sub_stream_figures(rec, proc):
            lines.append(", ".join([str(rec.row), f.sub, f"{f.target_bw:.1f}",
                                    f"{f.target_fps:.3f}", f"{f.bw:.1f}", f"{f.fps:.3f}", *map(str, (
                    f.frames, f.buffer_frames, f.late, f.late_in_buffer, f.dropped,
                    f.longest_late_run)), *(f"{v / 1000:.1f}" for v in (
                        f.lateness_p50, f.lateness_p99, f.lateness_max)),
                f.verdict, stream_label(proc)]))
    if not lines:
        return []
    subs = [sub_verdict(sub) for rec in records for sub in rec.subs]
    return ["Streams: lateness = completion - deadline (us, 0 when on time); a frame is late "
            f"more than -lateUs {tolerances(records, procs)} after its deadline, and lost when "
            "later than its stream's buffer holds (Buffer frames: that many periods more; 0: "
            "every late frame is lost); HELD: no frame lost or dropped", STREAM_HEADER, *lines,
            "",
            f"streams: {counted(stream_verdicts(records))} (sub-streams: {counted(subs)})",
            *stage_lines(records, procs), *starved_lines(records, procs)]


STAGE_HEADER = "proc,sub,From,Lost,Lapped,max(us),UpLate,UpLost,UpMax(us),Test"


def stage_lines(records, procs) -> list[str]:
    """Wired streams (-from), per sub-stream: its own lost frames (those its writer lapped
    among them) and greatest lateness, then what it inherited from its upstream: frames late by
    the upstream's lateness, lost or dropped by it alone, the greatest inherited (us)."""
    lines = []
    for rec, proc in zip(records, procs):
        lines += [", ".join([str(rec.row), f.sub, str(f.from_group), str(f.late), str(f.lapped),
                             f"{f.lateness_max / 1000:.1f}", str(f.up_late), str(f.up_lost),
                             f"{f.up_max / 1000:.1f}", stream_label(proc)])
                  for f in sub_stream_figures(rec, proc) if f.from_group is not None]
    if not lines:
        return []
    return ["", "Stages (-from): a wired stream reads the frames of group From; its Verdict, Lost "
            "and lateness above are its own; the lateness it waited for its upstream is "
            "inherited (Up: frames late by it, lost or dropped by it alone, the greatest); "
            "Lapped: lost, overwritten by the writer before the read", STAGE_HEADER, *lines]


def starved_lines(records, procs) -> list[str]:
    """A stream that MISSED while the loop's thread (which runs every stream of the process)
    waited for a CPU (CPU_WAITED % of the stream's measured interval or more) or was busy
    (LOOP_LIMITED): the misses are then torque-async's, not the storage's or memory's."""
    out = []
    for rec, proc in zip(records, procs):
        cpu = cpu_figures(rec, proc) if rec.subs and rec.elapsed >= SHORTEST_NS else None
        if not cpu or verdict_of(map(sub_verdict, rec.subs)) != MISSED:
            continue
        fifo = f" (even at {policy_text(*rec.sched)})" if rec.sched[0] else ""
        if (cpu["wait_pct"] or 0) >= CPU_WAITED:
            out.append(f"proc {rec.row}: the loop's thread waited for a CPU "
                       f"{cpu['wait_pct']:.0f}% of the time{fifo}: the misses are "
                       f"torque-async's" + ("" if fifo else ", try -rtprio"))
        elif cpu["busy_pct"] > 100 * LOOP_LIMITED:
            out.append(f"proc {rec.row}: the loop's thread was busy {cpu['busy_pct']:.0f}% of "
                       f"the time: the misses are torque-async's (it runs every loop test)")
    return out


def tolerances(records, procs) -> str:
    """The streams' -lateUs: '0 us', or each value with the procs it applies to."""
    rows: dict[int, list[int]] = {}
    for rec, proc in zip(records, procs):
        if rec.subs:
            rows.setdefault(proc.group.local.lateUs, []).append(rec.row)
    if len(rows) == 1:
        return f"{next(iter(rows))} us"
    return ", ".join(f"{us} us ({procs_named(rows[us])})" for us in sorted(rows))


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
         "timer": ("config", "procs"),
         "web": ("size", "config", "n", "procs", "iterations")}                # they do (in their info lines)


def info_lines(records) -> list[str]:
    """The lines of a group's info fields, each once, in order; each process's, labelled, when
    they differ (set-up chose a kernel variant per process)."""
    if len({r.info for r in records}) <= 1:
        return list(dict.fromkeys(ln for r in records for ln in r.info.splitlines() if ln))
    return [f"proc {r.row}: {ln}" for r in records for ln in r.info.splitlines() if ln]


def choice_lines(repetitions: list[tuple[Record, ...]], alone: list[list[Record]] | None,
                 procs) -> list[str]:
    """-repeat and -baseline: each test whose set-up chose differently (its info) between the
    repetitions, or alone and together, so a change of kernel is not read as contention."""
    said: dict[str, list[int]] = {}            # what is said -> the procs it is said of
    for i, proc in enumerate(procs):
        chose = [choices(recs[i].info) for recs in repetitions]
        if any(parts != chose[0] for parts in chose):
            said.setdefault("set-up chose differently in each repetition: " +
                            " | ".join(f"{k + 1}: {'; '.join(parts)}"
                                       for k, parts in enumerate(chose)), []).append(proc.row)
        if not alone:
            continue
        sides = (Counter(tuple(choices(r.info)) for r in alone[i]), Counter(map(tuple, chose)))
        if set(sides[0]) != set(sides[1]):   # (every repetition's, each side: -repeat)
            common = set.intersection(*(set(parts) for side in sides for parts in side))
            alone_text, together_text = (" | ".join(
                "; ".join(c for c in parts if c not in common)
                + (f" (in {k} of {sum(side.values())})" if sum(side.values()) > 1 else "")
                for parts, k in sorted(side.items())) for side in sides)
            said.setdefault(f"its set-up chose {alone_text} alone (-baseline), {together_text} "
                            f"together: the change may be partly that choice's, not only "
                            f"contention", []).append(proc.row)
    return [f"{procs_named(rows)}: {text}" for text, rows in said.items()]


def procs_named(rows: list[int]) -> str:
    """'proc 3', 'procs 1-16' or 'procs 0, 2-3' for rows in ascending order."""
    runs: list[list[int]] = []
    for row in rows:
        if runs and row == runs[-1][-1] + 1:
            runs[-1].append(row)
        else:
            runs.append([row])
    spans = ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in runs)
    return f"proc {rows[0]}" if len(rows) == 1 else f"procs {spans}"


# where a choice's candidates begin: the memory kernels' way, io/uring.TRIALS (O_DIRECT submits)
CANDIDATES = ", the fastest here of|, the best trial of each way here:"


def made_lines(records) -> list[str]:
    """The -f files set-up made or grew (their notes, once each): what the group block says,
    for a report without it (-nh, -bo), as a run's side effect on the user's files."""
    notes = [line for rec in records for line in rec.info.splitlines()
             if line.startswith(files.MADE)]
    return list(dict.fromkeys(notes))


# a scratch directory's name (PID, rank tag, mkdtemp's random part): new in every run, no choice
SCRATCH_NAME = re.compile(re.escape(SCRATCH) + r"[^/\s;]+")


def choices(info: str) -> list[str]:
    """An info's parts (its lines' "; " parts), each without the candidates it was chosen
    from (and their measured rates) and with its scratch directory's name as a pattern; a -f
    file's note (made by set-up) is no choice."""
    return [SCRATCH_NAME.sub(f"{SCRATCH}*", re.split(CANDIDATES, part)[0])
            for line in info.splitlines() if not line.startswith(files.MADE)
            for part in line.split("; ")]


def unreached_cap(group: Group) -> str:
    """A sequential file test's -mfile* beyond what its -n transfers reach: a maximum (torque's
    wrap), not the file's size as fio's `size` is, so say how far the test goes."""
    local = group.local
    cap = actions.max_size(local) if group.action in actions.SPECS else None
    reach = local.offset + (local.n - 1) * (local.size + local.vector) + local.size
    if not cap or actions.SPECS[group.action].order != "seq" or reach >= cap:
        return ""
    return (f"-mfile* = {cap / MB:g} MBytes is a maximum: this sequential test's -n {local.n} "
            f"transfers reach {reach / MB:g} MBytes of it (raise -n for more)")


def group_lines(plan: Plan, group: Group, records, procs, rank=no_rank) -> list[str]:
    local = group.local
    mine = [(r, p) for r, p in zip(records, procs) if p.group is group]
    size = mine[0][0].transfer_bytes if mine and mine[0][0].transfer_bytes else local.size
    kind = KINDS[group.action]
    largest = max((r.file_bytes for r, _ in mine), default=0)
    lines = {"size": f"transaction size = {size} ({kb_text(size)}K), ({human(size)})",
             "config": f"configuration file = {plan.config or 'none'}" + ("" if plan.from_config
                       else " (its global options: the command line named the tests)"),
             "n": f"number of transactions = {local.n}",
             "largest": largest and f"Largest File Size = {largest / MB:g} MBytes",
             "reach": unreached_cap(group),
             "working": kind.working_sets and
             f"Working Set = {kind.working_sets} x {local.n * size / MB:g} MBytes/process",
             "bytes": f"Bytes Transferred = {local.n * local.i * size / MB:g} MBytes/process",
             "procs": f"Number of processes = {len(mine)}",
             "iterations": f"Number of iterations = {local.i}",
             "ramp": local.ramp and f"Ramp (unmeasured transfers first) = {local.ramp:g} s"}
    if kind.family == "web":           # a request reads a whole file, in reads of `size`
        lines["size"] = (f"read size = {size} ({kb_text(size)}K), ({human(size)}): each request "
                         f"reads its file whole, in reads of up to this")
    if local.t is not None:            # -t: a time, not a count, ends the measured part
        measured = f", measured after the ramp: {local.t - local.ramp:g} s" if local.ramp else ""
        lines.update(n=f"run time = {local.t:g} s (-t{measured})", bytes="", iterations="")
    keep = PACED.get(kind.family, lines.keys())
    lines = [text for name, text in lines.items() if name in keep and text]
    lines += info_lines([r for r, _ in mine])
    lines += [setup_line([r for r, _ in mine], local.execChild)] \
        if any(r.setup_ns for r, _ in mine) else []
    ramped = sum(r.ramp_transfers for r, _ in mine)
    if ramped:
        lines.append(f"Unmeasured ramp transfers (-ramp) = {ramped}")
    extra = sum(r.extra_transfers for r, _ in mine)
    if extra:
        lines.append(f"Unmeasured transfers while waiting for the slowest test (-slow) = {extra}")
    if kind.runs_in == LOOP:
        lines += loop_pid_lines(event_loops(*zip(*mine), rank) if mine else {}, len(mine))
    return lines + [group.text]


def loop_pid_lines(loops: dict[tuple, list], size: int = 0) -> list[str]:
    """Which process runs a loop group's tests: torque-async itself, or under mpiexec each
    rank's own (`size`: the group's processes, some of which a stop may have kept from
    launching)."""
    def processes(tests: list) -> str:
        return f"{len(tests)} process{'es' * (len(tests) > 1)}"
    if len(loops) == 1:
        (_, pid), tests = next(iter(loops.items()))
        never = f" ({size - len(tests)} of its {size} never launched)" if size > len(tests) else ""
        return [f"PID {pid} is torque-async itself: its {processes(tests)} run"
                f"{'s' * (len(tests) == 1)} as coroutines on one event loop{never}"]
    return [f"PID {pid} is rank {where}'s torque-async: its {processes(tests)} of the group run"
            f"{'s' * (len(tests) == 1)} as coroutines on its own event loop"
            for (where, pid), tests in sorted(loops.items())] if loops else []


def setup_line(records, execed: bool) -> str:
    """The group's set-up: each process's own (from its code's start, the spawned mark, until
    ready at the start barrier: -checkpoint's set-up) and, for workers, how long after its
    process was started it was ready (setup_ns: a fork of the workers' server, or under
    -execChild a new interpreter's start and imports, included)."""
    def spread(times) -> str:
        times = sorted(t / NS_PER_MS for t in times)
        return f"{times[0]:.1f}" if len(times) == 1 else f"{times[0]:.1f} to {times[-1]:.1f}"
    ready = [r for r in records if r.setup_ns]
    over = f" over {len(ready)} processes" if len(ready) > 1 else ""
    own = spread(r.phase[1] - r.phase[0] for r in ready)
    spawned = any(r.phase[0] - r.launched for r in ready)       # a loop test starts at launch
    how = "a new interpreter and its imports included: -execChild" if execed else \
        "forked from the workers' server"
    started = f"; ready {spread(r.setup_ns for r in ready)} ms after its process was started " \
        f"({how})" if spawned else ""
    return f"Set-up = {own} ms{over} (the test's own, until ready at the start barrier){started}"


def startup_line(began, t0: int) -> str:
    """The time from the command's start (a startup.Began) to the start barrier's release."""
    if began is None or not t0:
        return ""
    known = f" (its start known to {began.resolution_ns / NS_PER_MS:g} ms)" \
        if began.resolution_ns else ""
    return (f"Start-up: {(t0 - began.ns) / NS_PER_MS:.0f} ms from the command's start to the "
            f"start barrier's release{known}")


def phase_durations(rec: Record) -> dict[str, float]:
    """ms each step took: set-up, barrier wait (spinWait calibrates there), test, and wind-down
    (-slow's unmeasured transfers, the data check, clean-up); steps not reached are left out."""
    return {name: (b - a) / NS_PER_MS
            for name, a, b in zip(STEPS, rec.phase, rec.phase[1:]) if a and b}


def checkpoint_lines(records, procs, t0: int) -> list[str]:
    lines = []
    for rec, proc in zip(records, procs):
        if proc.group.local.checkpoint and rec.phase[0] and t0:   # t0 0: nothing started
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
            buckets = ", ".join(f"{bucket_range(i)[1] / 1000:g} {n}" for i, n in rec.hist)
            lines.append(f"proc {rec.row} latency histogram (us at most: transfers): {buckets}")
    return lines


REPEAT_HEADER = "proc,Test,Figure,Median,Min,Max,Spread(%),SD,CV(%)"
BASELINE_HEADER = "proc,Test,Figure,Alone,Together,Change(%)"


def unresolved_lines(repetitions) -> list[str]:
    """-repeat: the rows whose figures were not resolved (resolution_flags) in some of the
    repetitions (the records of each), and in how many: their medians are not resolved."""
    counts = Counter(r.row for records in repetitions for r in records if resolution_flags(r))
    return [f"proc {row}: not resolved in {k} of {len(repetitions)} repetitions: its medians are "
            f"not resolved" for row, k in sorted(counts.items())]


def repeat_lines(spreads: list[dict[str, Spread]], procs, times: int, cluster=None,
                 unresolved: list[str] = ()) -> list[str]:
    """-repeat: each test's main figures over the repetitions (from figures.spreads); a
    report_cluster.ClusterRun adds Host and Rank columns, as to the table; `unresolved`: the
    unresolved_lines of the repetitions."""
    lines = [f"{proc.row}, {KINDS[proc.group.action].label}, {FIGURES[name].label}, "
             f"{s.median:.1f}, {s.lo:.1f}, {s.hi:.1f}, {spread_text(FIGURES[name], s)}, "
             f"{s.sd:.1f}, {cv_text(FIGURES[name], s)}" + where(cluster, proc.row)
             for got, proc in zip(spreads, procs) for name, s in got.items()]
    if not lines:
        return []
    return [f"Repeated {times} times (the other tables, above and below, are the first "
            f"repetition's): median, min, max, spread = (max - min) / median (a share's: max - "
            f"min, in points), standard deviation, CV = SD / mean (a share's: NA)",
            REPEAT_HEADER + (cluster.columns if cluster else ""),
            *lines, *unresolved]


def baseline_lines(found: list[Change], cluster=None, cut: set[int] = frozenset(),
                   unresolved: dict[int, str] = {},      # noqa: B006 - read only
                   ranks: list[Rank] = ()) -> list[str]:
    """-baseline: alone / together / change of each test's main figures (figures.changes),
    the test that lost most first, those whose figures were not resolved (`unresolved`: row ->
    'alone', 'together' or both, see resolution_flags) after the others and saying so; a
    cluster adds Host and Rank columns; the tests in `cut` (rows) were cut short together, and
    say so; `ranks` (figures.changes): the ranking, after the table (rank_lines)."""
    if not found:
        return []
    found = sorted(found, key=lambda c: c.proc in unresolved)     # (stable: each test's stay
    waited = [c for c in found if c.proc not in unresolved       # together, in their order)
              and c.figure.name == "wait_pct" and c.together >= c.alone + CPU_WAITED]
    last = ", the tests not resolved last" if any(c.proc in unresolved for c in found) else ""
    return ["Alone vs together (-baseline: in each repetition each group ran alone, then the plan "
            "together), in the order of the ranking below" + last,
            BASELINE_HEADER + (cluster.columns if cluster else ""),
            *(f"{c.proc}, {c.test}, {c.figure.label}, {c.alone:.1f}, {c.together:.1f}, "
              f"{change_text(c)}" + (" (cut short together)" if c.proc in cut else "")
              + (f" (not resolved {unresolved[c.proc]})" if c.proc in unresolved else "")
              + where(cluster, c.proc) for c in found),
            *(f"proc {c.proc} ({c.test}): waited for a CPU (runnable, not running) "
              f"{c.together:.0f}% of its time together, {c.alone:.0f}% alone: {BUSY_CPUS}, so "
              f"its slowdown is not all its memory's or disk's" for c in waited),
            *([""] + rank_lines(ranks) if ranks else [])]


def rank_lines(ranks: list[Rank]) -> list[str]:
    """-baseline's ranking: each test's change in its headline figure with its 95% interval,
    largest loss first; those within noise, and those of one run (no spread), said apart."""
    if not ranks:
        return []
    said = lambda r: (f"proc {r.proc} ({r.test}) {r.figure.label}: "            # noqa: E731
                      f"{change_text_of(r)}")
    ranked = [r for r in ranks if not r.noise]
    out = ["Ranked by each test's change in its headline figure, together against alone "
           "(bandwidth, a stream's too; -cyclic's p99; spinWait's loops/s), largest loss first:"]
    out += [f"{k}. {said(r)}" for k, r in enumerate(ranked, 1)]
    out += [f"within noise (together inside the alone runs' own min-max, or the interval holds "
            f"0), not ranked: {said(r)}" for r in ranks if r.noise == WITHIN_NOISE]
    out += [f"one run (no spread measured: -repeat N gives each an interval): {said(r)}"
            for r in ranks if r.noise == ONE_RUN]
    return out


def change_text_of(r: Rank) -> str:
    """'-37.0% (95% CI -40.1% to -33.9%; Welch's t, p = 0.0012)', or the point change."""
    f = r.finding
    change = "new" if f.pct is None else f"{f.pct:+.1f}%"
    if f.test is None:
        return change + (f" ({f.why})" if f.why != "one run" else "")
    interval = f"{f.interval_text(r.figure.label)}; " if f.pct_interval else ""
    return f"{change} ({interval}{f.test}, p = {f.p:.2g})"


BUSY_CPUS = "more runnable threads than CPUs, of these tests or other programs"


def waited_lines(rows, baseline: bool = False) -> list[str]:
    """The tests that waited for a CPU (runnable, not running) CPU_WAITED % of their measured
    time or more: their figures are partly the scheduler's, not the memory's or disk's alone
    (`baseline`: its block below says how much)."""
    waited = [r for r in rows if r.measured and (r.wait_pct or 0) >= CPU_WAITED]
    if not waited:
        return []
    shares = [r.wait_pct for r in waited]
    lo, hi = f"{min(shares):.0f}", f"{max(shares):.0f}"
    span = f"{lo}%" if lo == hi else f"{lo}-{hi}%"
    return [f"{procs_named([r.row for r in waited])}: waited for a CPU {span} of the measured "
            f"time ({BUSY_CPUS}): the figures are partly time-slicing's"
            + ("" if baseline else "; -baseline shows how much")]


def change_text(c: Change) -> str:
    """The Change column: % of the figure alone; a share's (CPU(%), CPU wait(%)) in points, as
    a share from 0.3% to 36.8% is no +11069%."""
    if is_share(c.figure):
        return f"{c.together - c.alone:+.1f} points"
    return "new" if c.change_pct is None else f"{c.change_pct:+.1f}"


def spread_text(figure, s: Spread) -> str:
    """The Spread(%) column: % of the median; a share's in points (max - min), as a CPU wait
    from 0.0% to 1.7% over a median of 0.02% is no 9206%."""
    if is_share(figure):
        return f"{s.hi - s.lo:.1f} points"
    return "NA" if s.spread_pct is None else f"{s.spread_pct:.1f}"


def cv_text(figure, s: Spread) -> str:
    """The CV(%) column: SD / mean in %; NA for a share (its SD, in points, says it) or a mean
    of 0."""
    return "NA" if is_share(figure) or s.cv_pct is None else f"{s.cv_pct:.1f}"


ONE_RUN_LINE = ("one run: its figures have no spread measured (-repeat N gives each its median, "
                "standard deviation and CV; compare tells a change from noise with it)")


def is_share(figure) -> bool:
    """A figure that is itself a percentage (CPU(%), CPU wait(%))."""
    return figure.label.endswith("(%)")


def rank_of(cluster):
    """A row's rank under mpiexec (no_rank on one host)."""
    return (lambda row: cluster.rank_of(row).rank) if cluster else no_rank


def where(cluster, row: int) -> str:
    """A row's Host and Rank columns under mpiexec ('' on one host)."""
    return cluster.where(row) if cluster else ""


def render(plan: Plan, records: tuple[Record, ...], procs: tuple[Proc, ...], info: SysInfo,
           date: str, failures: tuple[str, ...] = (), interrupted: int = 0,
           cluster=None, runs: list[str] = (), unfinished: tuple[str, ...] = (),
           began=None, complete: int = 0, alone: str = "", repetitions=()) -> list[str]:
    """The whole text report; -nh drops the header, -bo keeps only the bandwidth lines, with
    what says they are not whole (figures not resolved, an interruption, failures); a
    report_cluster.ClusterRun adds Host and Rank columns and the cluster's block; `runs`: the
    -repeat and -baseline blocks, printed after the table; `unfinished` lists the tests a stop
    (a signal, a failure) cut short; `began` (a startup.Began) when the command started;
    `complete`: the repetitions before the one a signal or a failure stopped (-repeat);
    `alone`: the -baseline run alone that a stop ended before anything ran together, whose
    figures these are ('group 1 alone (-baseline)'); `repetitions`: every complete repetition's
    records (-repeat: the BW: line gives their medians)."""
    t0 = time_zero(records)
    bw = bw_lines(plan, repetitions or (records,), procs)
    # the processes listed one by one (a grouped kind's only with -v)
    shown = [(r, p) for r, p in zip(records, procs) if per_process(p, plan.settings.vl)]
    rows, each = tuple(r for r, _ in shown), tuple(p for _, p in shown)
    closing = closing_lines(failures, interrupted, unfinished, complete, alone)
    if plan.settings.bo:               # (of several repetitions, the BW: line's are medians)
        unresolved = unresolved_lines(repetitions) if len(repetitions) > 1 else \
            resolution_lines(rows)
        spans = [line for group in plan.groups for line in web.unresolved(
            group, web.group_summary(group, records, procs), SHORTEST_NS)]
        return nonblank([*bw, "", *unresolved, *spans, *made_lines(records), "", *closing])
    lines: list[str] = []
    if not plan.settings.nh:
        lines += [f"torque-async, version: {__version__}", f"torque-async {plan.command}".rstrip(),
                  date, f"seed = {plan.settings.seed}",
                  *([f"smkey = {plan.settings.smkey:#x}"] if plan.settings.smkey is not None
                    else ()), "", *header_lines(info), "",
                  "torque-async (time in ms)",
                  f"We waited for {len(procs)} process{'es' * (len(procs) != 1)}"]
        for group in plan.groups:
            lines += group_lines(plan, group, records, procs, rank_of(cluster)) + [""]
    table = [table_row(r, p, t0).text() + where(cluster, r.row)
             for r, p in zip(rows, each) if r.measured]
    lines += [TABLE_HEADER + (cluster.columns if cluster else ""), *table] if table else []
    lines += [*resolution_lines(rows), *waited_lines(rows, plan.settings.baseline),
              *(made_lines(records) if plan.settings.nh else ()), "",
              *summary_lines(plan, records, procs)]
    lines += filter(None, (overlap_line(plan, records, t0, cluster, procs),
                           *mostly_alone_lines(plan, records), startup_line(began, t0),
                           loop_line(records, procs, rank_of(cluster)), *spin_lines(records),
                           *check_lines(records, procs),
                           *cyclic_lines(records, procs), *checkpoint_lines(records, procs, t0)))
    for group in plan.groups:
        lines += ["", *web.lines(group, records, procs, SHORTEST_NS)]
    lines += ["", *runs, "", *(cluster.lines(t0, repetitions) if cluster else ())]
    lines += ["", *stream_lines(records, procs), "", *sample_lines(records, procs, t0)]
    if plan.settings.vl:
        lines += ["", *detail_lines(records, procs, plan.settings.vl)]
    if not plan.settings.nh:
        lines += ["", *latency_lines(rows, each), "", *cpu_lines(rows, each)]
    return nonblank([*lines, "", *bw, "", *closing])


def closing_lines(failures: tuple[str, ...], interrupted: int, unfinished: tuple[str, ...],
                  complete: int = 0, alone: str = "") -> list[str]:
    """What says the figures are not whole: the interruption (of a repetition after `complete`
    whole ones), the failures, each with the tests the stop cut short."""
    lines = []
    where = f" in {alone}, before any run together" if alone else ""
    after = f"{complete} complete repetition{'s' * (complete != 1)}{where}: the figures are " \
            f"theirs"
    if interrupted:
        name = signal.Signals(interrupted).name
        lines += [f"INTERRUPTED by {name} after {after}" if complete else
                  f"INTERRUPTED by {name}{where}: the figures cover the transfers measured "
                  f"before it", *unfinished, ""]
    if failures:
        lines += ["INCOMPLETE: some tests failed" + (
                      f" (after {after})" if complete and not interrupted else where),
                  *failures, *(() if interrupted else unfinished)]
    return lines


def nonblank(lines: list[str]) -> list[str]:
    """No blank line first, none after another, none last."""
    kept = [ln for i, ln in enumerate(lines) if ln or (i and lines[i - 1])]
    return kept[:-1] if kept and not kept[-1] else kept
