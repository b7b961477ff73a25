#!/usr/bin/env python3
"""The profiling steps' readers on made-up files: scripts/limiters.py (ncu raw
CSV -> one row per launch and a limiter reading) and scripts/counters_summary.py
(measure --counters beside ncu; decode reconciled). Where real ncu output sits
in tests/fixtures/ncu-h200/limiters-*.csv (our H200 runs), limiters.py must read it as the run did.

    profile_summary_test.py SCRIPTS_DIR FIXTURES_DIR
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

scripts, fixtures = sys.argv[1], sys.argv[2]
fails = 0


def check(cond, what, text=""):
    global fails
    if not cond:
        fails += 1
        print(f"FAIL: {what}\n{text}")


def run(script, *args):
    return subprocess.run([sys.executable, os.path.join(scripts, script), *args], capture_output=True, text=True)


HEAD = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
        "Grid Size", "Device", "CC"]


def raw_csv(path, metrics, launches):
    """An ncu --csv --page raw file: header, units row, one row per launch."""
    names = HEAD + list(metrics)
    with open(path, "w") as f:
        f.write('==PROF== Connected to process 1\n')
        f.write(",".join(f'"{n}"' for n in names) + "\n")
        f.write(",".join('""' for _ in HEAD) + "," + ",".join(f'"{u}"' for u in metrics.values()) + "\n")
        for i, (kernel, values) in enumerate(launches):
            row = [str(i), "1", "hbmscope", "h", kernel, "1", "7", "(256, 1, 1)", "(1056, 1, 1)", "0", "9.0"]
            row += [values.get(m, "") for m in metrics]
            f.write(",".join(f'"{v}"' for v in row) + "\n")


with tempfile.TemporaryDirectory() as d:
    metrics = {
        "dram__bytes_read.sum": "byte", "dram__bytes_write.sum": "byte",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed": "%", "gpu__time_duration.sum": "nsecond",
        "launch__grid_size": "", "launch__block_size": "", "launch__registers_per_thread": "register/thread",
        "launch__occupancy_limit_registers": "block", "launch__occupancy_limit_warps": "block",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed": "%",
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": "%",
        "sm__warps_active.avg.pct_of_peak_sustained_active": "%",
        "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": "ratio",
        "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio": "ratio",
        "smsp__average_warps_issue_stalled_selected_per_issue_active.ratio": "ratio",
    }
    memory = {"dram__bytes_read.sum": "402,653,184", "dram__bytes_write.sum": "117,440,512",
              "dram__throughput.avg.pct_of_peak_sustained_elapsed": "87.4", "gpu__time_duration.sum": "124,032",
              "launch__grid_size": "1056", "launch__block_size": "256", "launch__registers_per_thread": "40",
              "launch__occupancy_limit_registers": "6", "launch__occupancy_limit_warps": "8",
              "sm__throughput.avg.pct_of_peak_sustained_elapsed": "20.5",
              "sm__warps_active.avg.pct_of_peak_sustained_active": "91",
              "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": "40.2",
              "smsp__average_warps_issue_stalled_selected_per_issue_active.ratio": "1"}
    latency = dict(memory, **{"dram__throughput.avg.pct_of_peak_sustained_elapsed": "61.0",
                              "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio": "55.5"})
    compute = dict(memory, **{"dram__throughput.avg.pct_of_peak_sustained_elapsed": "3.2",
                              "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": "78.0"})
    raw_csv(f"{d}/a.csv", metrics, [
        ("void hbmscope::cuda::(anonymous namespace)::floor_kernel(const uint4 *, const uint4 *)", memory),
        ("void hbmscope::cuda::(anonymous namespace)::softmax_rows_kernel<2>(hbmscope::cuda::SoftmaxArgs)", latency),
        ("void flash::flash_forward_v2_kernel<128, 128, 64>(flash::FlashParams)", compute)])
    p = run("limiters.py", f"floor={d}/a.csv")
    check(p.returncode == 0, "limiters.py reads a raw CSV", p.stderr)
    out = p.stdout
    check("floor_kernel" in out and "softmax_rows_kernel" in out and "flash_forward_v2_kernel" in out,
          "kernel names shortened past namespaces and templates", out)
    check("124.0 us" in out and "402.7 MB" in out and "117.4 MB" in out, "time and bytes with units", out)
    check("registers (6 CTAs)" in out, "occupancy bound by the resource with the fewest CTAs", out)
    check("DRAM bandwidth (87 % of peak)" in out, "DRAM-bound reading", out)
    check("latency (DRAM 61 %, occupancy 91 %, top stall barrier 55.5)" in out, "latency reading, top stall", out)
    check("compute: tensor pipe 78 %" in out, "compute-bound reading", out)
    check("selected" not in out, "the 'selected' pseudo-stall left out", out)
    p = run("limiters.py", f"x={d}/missing.csv")
    check(p.returncode == 1 and "no kernel launch" in p.stderr, "no launch: exit 1 with a reason", p.stderr)

    # counters_summary.py: CUPTI vs ncu within 5 %, decode reconciled.
    r = os.path.join(d, "r")
    os.makedirs(r)

    def meas(kernel, read, status="ok"):
        m = {"kernel": kernel, "counters": status, "model_bytes": read}
        if status == "ok":
            m["dram_read_bytes"] = read
            m["dram_write_bytes"] = read // 4
        return m

    def save(name, obj):
        with open(os.path.join(r, name), "w") as f:
            json.dump(obj, f)

    save("counters-4096-d128.json", {"rows": [{"measurements": [
        meas("standard", 4_510_000_000), meas("flash", 205_000_000), meas("floor", 201_000_000)]}]})
    call = lambda kind, read: {"kind": kind, "counted": {"read_bytes": read}}  # noqa: E731
    save("reconcile-ours-4096-d128-c0.json", {"reconcile": {"calls": [
        call("standard", 4_500_000_000), call("standard", 4_520_000_000), call("standard", 4_510_000_000),
        call("flash", 204_000_000), call("floor", 201_000_000)]}})
    for k in ("decode", "decode_paged"):
        for bl in ("2x131072", "32x4096"):
            save(f"reconcile-{k}-{bl}.json", {"reconcile": {"calls": [
                {"kind": "split_kv", "counted": {"read_bytes": 1_075_000_000}, "reads_over_model": 1.002,
                 "verdict": "MATCHES", "judged_against": "decode_paged" if k == "decode_paged" else "decode_split"}]}})
    save("counters-decode-2x131072.json", {"rows": [{"measurements": [meas("decode", 1_074_000_000)]}]})
    p = run("counters_summary.py", "--results", r)
    out = p.stdout
    check(p.returncode == 0, "counters_summary.py runs", p.stderr)
    check("COUNTERS VS NCU" in out and ": MET (standard 4510.0 MB vs 4510.0 MB = 1.000x" in out,
          "CUPTI beside ncu's median per kind, MET within 5 %", out)
    check("DECODE COUNTED VS MODEL" in out and ": MET (4 of 4 captures" in out, "four decode captures: MET", out)
    check("CUPTI reads 1074.0 MB" in out, "CUPTI's decode reads beside ncu's", out)
    check("DECODE COUNTERS VS NCU" in out and ": MISSED (1 of 4 with CUPTI reads; decode 2x131072 0.999x)" in out,
          "decode kernels without CUPTI figures: MISSED", out)
    for k in ("decode", "decode_paged"):
        for bl in ("2x131072", "32x4096"):
            save(f"counters-decode-{bl}.json", {"rows": [{"measurements": [
                meas("decode", 1_075_000_000), meas("decode_paged", 1_074_000_000)]}]})
    out = run("counters_summary.py", "--results", r).stdout
    check(": MET (4 of 4 with CUPTI reads" in out, "every decode kernel counted by CUPTI within 5 %: MET", out)
    save("counters-4096-d128.json", {"rows": [{"measurements": [meas("flash", 230_000_000)]}]})
    out = run("counters_summary.py", "--results", r).stdout
    check("COUNTERS VS NCU" in out and ": MISSED (flash" in out, "12 % apart: MISSED", out)
    save("counters-4096-d128.json", {"rows": [{"measurements": [meas("flash", 0, "CUPTI: insufficient privileges")]}]})
    out = run("counters_summary.py", "--results", r).stdout
    check("NOT MEASURED (flash: CUPTI: insufficient privileges)" in out, "a counter failure says why", out)
    empty = os.path.join(d, "empty")
    os.makedirs(empty)
    out = run("counters_summary.py", "--results", empty).stdout
    check(out.count("NOT MEASURED") == 2, "nothing measured: both NOT MEASURED", out)

# Real Nsight Compute output of our H200 runs (tests/fixtures/ncu-h200, units
# scaled per column: ms, Gbyte): every column filled, and the reading the run gave.
expected = {"limiters-floor-8192.csv": "DRAM bandwidth (84 % of peak)",
            "limiters-softmax-4096.csv": "latency (DRAM 75 %, occupancy 70 %, top stall short_scoreboard 6.7)",
            "limiters-decode_paged-2x131072.csv": "latency (DRAM 76 %, occupancy 11 %, top stall wait 1.9)"}
real = sorted(glob.glob(os.path.join(fixtures, "ncu-h200", "limiters-*.csv")))
check(len(real) == len(expected), "the real limiter captures are there", str(real))
for f in real:
    p = run("limiters.py", f"real={f}")
    row = p.stdout.splitlines()[1].split() if p.returncode == 0 and len(p.stdout.splitlines()) > 1 else []
    check(p.returncode == 0 and "-" not in row, f"limiters.py fills every column of {os.path.basename(f)}",
          p.stdout + p.stderr)
    want = expected.get(os.path.basename(f), "")
    check(want in p.stdout, f"{os.path.basename(f)}: {want}", p.stdout)
floor = run("limiters.py", "floor=" + os.path.join(fixtures, "ncu-h200", "limiters-floor-8192.csv")).stdout
check("128.2 us" in floor and "402.7 MB" in floor and "116.9 MB" in floor, "real units (ms, Gbyte) scaled", floor)

print(f"profile_summary: {'ok' if fails == 0 else f'{fails} failed'}")
sys.exit(1 if fails else 0)
