"""The -web report: one summary per group, from the merged figures of its clients (pure)."""
from __future__ import annotations

from typing import Any

from ..results import SIZE_LAW, WEB_LOAD, WEB_OPS
from ..stats import Stats, merge
from ..units import KB, MB, NS_PER_MS

HEADER = "op,count,min,avg,p50,p90,p99,p99.9,p99.99,max (us)"


def latency(stats: Stats) -> dict[str, int] | None:
    if not stats.count:
        return None
    return {"count": stats.count, "min": stats.lo, "avg": stats.avg,
            **stats.percentiles(), "max": stats.hi}


def group_summary(group, records, procs) -> dict[str, Any] | None:
    """A -web group's figures: requests/s and MB/s of every request made in the span from its
    first client's start to its last one's finish, latency per request and per operation from
    the histograms of the measured requests merged over its clients, the sizes of the tree, and
    the most files open at once."""
    pairs = [(r, p) for r, p in zip(records, procs) if p.group is group and r.measured]
    mine = [r for r, _ in pairs]
    if group.action != "web" or not mine:
        return None
    span = max(r.finish for r in mine) - min(r.start for r in mine)
    # every request made in the span (the clients run together: some of them unmeasured, past
    # their own n x i while others finish theirs), as the last client of each event loop to
    # publish counted its loop's (under mpiexec a rank's: its group's first row, less the
    # client's place in it, names it), summed over the loops
    loops: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
    for r, p in pairs:
        loops[p.row - p.index] = max(loops.get(p.row - p.index, ((), ())),
                                     (r.group_work, r.web_load or (0,) * len(WEB_LOAD)))
    requests, read, appended = (sum(work) for work in zip(*(w for w, _ in loops.values())))
    most_open: dict[int, int] = {}                   # each loop's most, summed over the loops
    for r, p in pairs:
        most_open[p.row - p.index] = max(most_open.get(p.row - p.index, 0), r.most_open)
    # the same publish's files open, requests in flight and CPU, summed over the loops; the
    # log's size from the loop's last client to check it
    open_ns, flight_ns, most_flight, cpu_ns = (
        sum(load) for load in list(zip(*(w for _, w in loops.values())))[:4])
    # the tree's device's mean queue over the same interval (the deepest loop's: loops on one
    # host share the device)
    queues = [w[5] * NS_PER_MS / w[6] for _, w in loops.values() if w[5] >= 0 and w[6] > 0]
    logs = [r.web_load[WEB_LOAD.index("log_bytes")] for r in mine if r.web_load]
    ops = {name: latency(merge([r.op_lat[i] for r in mine if r.op_lat]))
           for i, name in enumerate(WEB_OPS)}
    law = next((r.size_law for r in mine if r.size_law), (0,) * len(SIZE_LAW))
    return {"clients": len(mine), "measured": sum(r.transfers for r in mine),
            "requests": requests, "span_ns": span,
            "requests_per_s": requests * 1e9 / span if span else 0.0,
            "read_bytes": read, "appended_bytes": appended,
            "read_mb_per_s": read * 1e9 / span / MB if span else 0.0,
            "append_mb_per_s": appended * 1e9 / span / MB if span else 0.0,
            "request": latency(merge([r.lat for r in mine])), "ops": ops,
            "ops_unresolved": sum(r.unsplit for r in mine),
            "sizes": dict(zip(SIZE_LAW, law)), "most_open": sum(most_open.values()),
            "mean_open": open_ns / span if span else 0.0, "most_in_flight": most_flight,
            "mean_in_flight": flight_ns / span if span else 0.0,
            "cpu_ns_per_request": cpu_ns / requests if requests else 0.0,
            "log_bytes": max(logs) if logs and max(logs) >= 0 else None,
            "log_kept": bool(group.local.keepLog),
            "device_queue": max(queues) if queues else None}


def unresolved(group, s: dict[str, Any] | None, shortest_ns: int) -> list[str]:
    """The line that says a group's summary `s` spans less than shortest_ns: its rates are not
    resolved (none when they are, or without a summary)."""
    if s is None or s["span_ns"] >= shortest_ns:
        return []
    return [f"Web group {group.index}: measured for {s['span_ns'] / NS_PER_MS:.1f} ms "
            f"(< {shortest_ns // NS_PER_MS} ms): its rates are not resolved"]


def lines(group, records, procs, shortest_ns: int) -> list[str]:
    """The summary's lines; a span shorter than shortest_ns is flagged as not resolved."""
    s = group_summary(group, records, procs)
    if s is None:
        return []
    sizes = s["sizes"]
    out = [f"Web group {group.index}: {s['clients']} clients, {s['requests']} requests in "
           f"{s['span_ns'] / NS_PER_MS:.0f} ms ({s['measured']} timed): "
           f"{s['requests_per_s']:.0f} requests/s, "
           f"{s['read_mb_per_s']:.1f} MB/s read, {s['append_mb_per_s']:.2f} MB/s appended "
           f"(every request over the group's span; BW: sums each client's timed ones over its "
           f"own interval)",
           f"Web group {group.index} load: files open at once: at most {s['most_open']}, "
           f"{mean_open(s)}; requests in flight: at most {s['most_in_flight']}, mean "
           f"{s['mean_in_flight']:.1f}; CPU {s['cpu_ns_per_request'] / 1000:.1f} us per "
           f"request (the process's, user and system); the tree's disk: " + (
               "no queue figure (its file system is on no one block device: the web tree "
               "line says which)" if s["device_queue"] is None else
               f"{s['device_queue']:.2f} I/Os in its queue on average (/proc/diskstats, "
               f"everything on that device)"),
           f"Web group {group.index} tree: {sizes['files']} files, mean "
           f"{sizes['mean'] / KB:.1f} KB, p50 {sizes['p50'] / KB:.1f} KB, "
           f"p99 {sizes['p99'] / KB:.1f} KB", HEADER]
    if s["log_bytes"] is not None:
        out.insert(2, f"Web group {group.index} log: {s['log_bytes']} bytes at the end, "
                   + ("kept (-keepLog)" if s["log_kept"] else "removed (-keepLog keeps it)"))
    out[1:1] = unresolved(group, s, shortest_ns)
    out[-1:-1] = unsplit(group, s)
    for name, lat in (("request", s["request"]), *s["ops"].items()):
        if lat:
            out.append(", ".join([name, str(lat["count"]), *(f"{v / 1000:.1f}" for k, v in
                                                             lat.items() if k != "count")]))
        elif name in SPLIT and s["ops_unresolved"]:
            out.append(f"{name}, unresolved")
    return out


def mean_open(s: dict[str, Any]) -> str:
    """The mean of the files open at once: a file is open from its open's completion to its
    close's, so where a request's completions were seen together (unsplit) its time open is
    not known (it adds 0 or a part of it): not resolved when no timed request's split was,
    else how many were not said beside it."""
    n, measured = s["ops_unresolved"], s["measured"]
    if n and n == measured:
        return "mean not resolved (each timed request's open and close completions were seen " \
               "together: the time a file was open is unknown)"
    return f"mean {s['mean_open']:.1f}" + (f" (not resolved for {n} of {measured} timed "
                                           f"requests, whose completions were seen together)"
                                           if n else "")


SPLIT = WEB_OPS[:3]                              # a request's chain: open, reads, close


def unsplit(group, s: dict[str, Any]) -> list[str]:
    """The line that says for how many measured requests the split into open, reads and close
    is not resolved (none when every one is)."""
    n = s["ops_unresolved"]
    if not n:
        return []
    return [f"Web group {group.index} operations: open, read and close resolved for "
            f"{s['measured'] - n} of {s['measured']} timed requests; the other {n} are left out "
            f"of their lines (their chain's completions were seen together, at one clock read: "
            f"their split is unknown, their total is in the request line; -engine threads or "
            f"sync time each call apart)"]
