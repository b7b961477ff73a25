#!/usr/bin/env python3
"""scripts/device_summary.py on made-up reports: the targets are judged from the
measured figures, a failed kernel is listed with its reason, a missing report is
said and does not stop the table, and no report at all is 'NOT MEASURED'."""
import json
import os
import subprocess
import sys
import tempfile

script = sys.argv[1]


def meas(kernel, median, copy_fraction, tflops, **extra):
    return dict(kernel=kernel, status="ok", reason="", rel_error=1e-3, time_s={"median": median},
                bandwidth_Bps=1e12, copy_fraction=copy_fraction, tflops=tflops, **extra)


def run(*paths):
    p = subprocess.run([sys.executable, script, *paths], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout


def check(cond, what, text):
    if not cond:
        print(f"FAIL: {what}\n{text}")
        sys.exit(1)


with tempfile.TemporaryDirectory() as d:
    def write(name, obj):
        path = os.path.join(d, name)
        with open(path, "w") as f:
            json.dump(obj, f)
        return path

    def report(softmax_fraction, flash_median):
        return {"device": {"copy": {"bandwidth_Bps": 4.3e12}}, "rows": [
            {"shape": {"seq_q": 4096, "head_dim": 64, "causal": False},
             "measurements": [meas("flash", flash_median, 0.1, 500.0, block_rows=128, block_cols=128),
                              meas("softmax", 2e-3, softmax_fraction, 0.0), meas("floor", 1e-4, 0.96, 0.0),
                              dict(kernel="standard", status="failed", reason="rel error 0.5 above 1e-2")]}]}

    sdpa = write("sdpa.json", {"results": [
        dict(backend="flash", seq=4096, head_dim=64, causal=False, status="ok", median_s=1.1e-3, tflops=450.0),
        dict(backend="cudnn", seq=4096, head_dim=64, causal=False, status="ok", median_s=0.9e-3, tflops=550.0)]})

    out = run(sdpa, write("good.json", report(0.92, 1.0e-3)))
    check("4.30 TB/s" in out, "copy ceiling", out)
    check("1.10" in out and "128×128" in out, "speed ratio from median times, tile pair", out)
    check("standard: failed: rel error 0.5" in out, "failed kernel listed", out)
    check("flash>=1.0x MET, softmax>=90% MET, floor>=95% MET" in out, "all targets met", out)

    out = run(sdpa, write("slow.json", report(0.85, 1.2e-3)))
    check("flash>=1.0x NOT MET, softmax>=90% NOT MET, floor>=95% MET" in out, "targets missed", out)

    out = run(os.path.join(d, "absent.json"), write("good2.json", report(0.92, 1.0e-3)))
    check("missing or unreadable" in out and "flash>=1.0x NOT MET" in out, "no peer: flash target not met", out)

    out = run(os.path.join(d, "absent.json"), os.path.join(d, "absent2.json"))
    check("NOT MEASURED" in out and " MET," not in out, "nothing measured", out)
print("device_summary: 4 cases passed")
