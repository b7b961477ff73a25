#!/usr/bin/env python3
"""One table of what limits each profiled kernel, from `ncu --csv --page raw` files.

    limiters.py TAG=FILE.csv [TAG=FILE.csv ...]

Each file is Nsight Compute's raw page of one case (scripts/device-check.d/
55-limiters.sh collects the SpeedOfLight, MemoryWorkloadAnalysis, Occupancy,
LaunchStats, WarpStateStats and SchedulerStats sections). Per kernel launch:
time, DRAM bytes and throughput (% of the sustained peak), SM, L2 and tensor
pipe throughput, achieved and theoretical occupancy and what bounds the
latter, issue-slot use, the three largest warp stalls (cycles per issued
instruction) and a one-line reading of the limiter:
  DRAM bandwidth   DRAM throughput >= 80 % of peak;
  compute          SM or tensor throughput >= 70 % and above DRAM's;
  latency          neither: too few bytes in flight, with the stall that
                   dominates (long_scoreboard = waiting on memory, barrier =
                   __syncthreads, ...) and the occupancy.
A metric the file lacks prints as "-". Exit 1 if no file held a launch.
"""
import csv
import re
import sys

STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
OCC_LIMITS = ("registers", "shared_mem", "warps", "blocks")


BYTE_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
TIME_UNIT = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9,
             "s": 1e9}


def scale(unit):
    """Factor from a unit of the raw page's second row to bytes or nanoseconds (1 for any other)."""
    unit = unit.strip()
    if unit in TIME_UNIT:
        return TIME_UNIT[unit]
    m = re.fullmatch(r"([KMGT]?)byte", unit)
    return BYTE_PREFIX[m.group(1)] if m else 1.0


def rows_of(path):
    """The launches of a raw CSV as {metric: value}, values in bytes and nanoseconds
    (ncu scales each column to its own unit, named in the second row)."""
    with open(path, newline="") as f:
        lines = [l for l in f if not l.startswith("==")]
    header = units = None
    out = []
    for rec in csv.reader(lines):
        if header is None:
            if rec and rec[0] == "ID":
                header = rec
            continue
        if len(rec) != len(header):
            continue
        if units is None and not rec[0].strip():
            units = rec
            continue
        if not rec[0].strip().isdigit():
            continue
        row = {}
        for i, (k, v) in enumerate(zip(header, rec)):
            try:
                row[k] = float(v.replace(",", "").strip()) * (scale(units[i]) if units else 1.0)
            except ValueError:
                row[k] = v  # a name, a grid "(1056, 1, 1)", "n/a"
        out.append(row)
    return out


def num(row, *keys):
    """The first of `keys` the row has as a number."""
    for key in keys:
        if isinstance(row.get(key), float):
            return row[key]
    return None


DRAM_PCT = ("dram__throughput.avg.pct_of_peak_sustained_elapsed",
            "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed")


def fmt(x, spec="{:.0f}", unit=""):
    return "-" if x is None else spec.format(x) + unit


def short_kernel(name):
    name = name.replace("(anonymous namespace)", "")
    name = re.sub(r"\(.*$", "", name)          # parameters
    name = re.sub(r"<.*$", "", name)           # template arguments
    return name.split("::")[-1].split()[-1][:28] if name.strip() else "?"


def occupancy_limit(row):
    """The resource with the fewest CTAs per SM (launch__occupancy_limit_*)."""
    limits = [(num(row, "launch__occupancy_limit_" + k), k) for k in OCC_LIMITS]
    limits = [(v, k) for v, k in limits if v is not None]
    if not limits:
        return "-"
    v, k = min(limits)
    return f"{k} ({v:.0f} CTAs)"


def limiter(row, stalls):
    dram = num(row, *DRAM_PCT)
    sm = num(row, "sm__throughput.avg.pct_of_peak_sustained_elapsed")
    tensor = num(row, "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active")
    comp = max(x for x in (sm, tensor, 0.0) if x is not None)
    if dram is not None and dram >= 80:
        return f"DRAM bandwidth ({dram:.0f} % of peak)"
    if comp >= 70 and (dram is None or comp > dram):
        what = "tensor pipe" if tensor is not None and tensor >= comp else "SM"
        return f"compute: {what} {comp:.0f} %"
    occ = num(row, "sm__warps_active.avg.pct_of_peak_sustained_active")
    top = f"{stalls[0][0]} {stalls[0][1]:.1f}" if stalls else "stalls unknown"
    return f"latency (DRAM {fmt(dram)} %, occupancy {fmt(occ)} %, top stall {top})"


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    header = ("case", "kernel", "grid", "block", "regs", "time", "DRAM read", "DRAM write", "DRAM %", "SM %",
              "L2 %", "tensor %", "occ. ach/theo", "occ. bound", "issue %", "top stalls (cycles/issue)")
    table = []
    readings = []
    for arg in argv[1:]:
        tag, _, path = arg.partition("=")
        if not path:
            tag, path = arg, arg
        try:
            rows = rows_of(path)
        except OSError as e:
            print(f"limiters: {path}: {e.strerror}", file=sys.stderr)
            continue
        for row in rows:
            stalls = sorted(((m.group(1), num(row, k)) for k in row for m in [STALL.match(k)]
                             if m and num(row, k) is not None and m.group(1) != "selected"),
                            key=lambda s: -s[1])
            t = num(row, "gpu__time_duration.sum")
            rd, wr = num(row, "dram__bytes_read.sum"), num(row, "dram__bytes_write.sum")
            table.append((
                tag, short_kernel(row.get("Kernel Name", "?")),
                fmt(num(row, "launch__grid_size")), fmt(num(row, "launch__block_size")),
                fmt(num(row, "launch__registers_per_thread")),
                fmt(t / 1e3 if t is not None else None, "{:.1f}", " us"),
                fmt(rd / 1e6 if rd is not None else None, "{:.1f}", " MB"),
                fmt(wr / 1e6 if wr is not None else None, "{:.1f}", " MB"),
                fmt(num(row, *DRAM_PCT)),
                fmt(num(row, "sm__throughput.avg.pct_of_peak_sustained_elapsed")),
                fmt(num(row, "lts__throughput.avg.pct_of_peak_sustained_elapsed")),
                fmt(num(row, "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active")),
                fmt(num(row, "sm__warps_active.avg.pct_of_peak_sustained_active")) + "/" +
                fmt(num(row, "sm__maximum_warps_per_active_cycle_pct")),
                occupancy_limit(row),
                fmt(num(row, "smsp__issue_active.avg.pct_of_peak_sustained_active")),
                ", ".join(f"{n} {v:.1f}" for n, v in stalls[:3]) or "-",
            ))
            readings.append(f"{tag} ({short_kernel(row.get('Kernel Name', '?'))}): {limiter(row, stalls)}")
    if not table:
        print("limiters: no kernel launch in the files", file=sys.stderr)
        return 1
    widths = [max(len(str(r[i])) for r in table + [header]) for i in range(len(header))]
    for r in [header] + table:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
    print()
    print("Limiter, as the counters read (DRAM % and SM % of the sustained peak, elapsed):")
    for line in readings:
        print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
