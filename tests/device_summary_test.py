#!/usr/bin/env python3
"""scripts/device_summary.py on made-up reports: each target is judged from the
measured figures (MET / MISSED with the worst shape), a failed kernel is listed
with its reason, a shape whose output fits in L2 is not judged, a missing
report is said and does not stop the table, and no report at all is
'NOT MEASURED' for every target."""
import json
import os
import subprocess
import sys
import tempfile

script = sys.argv[1]


def meas(kernel, median, copy_fraction, tflops, **extra):
    return dict(kernel=kernel, status="ok", reason="", rel_error=1e-3, time_s={"median": median},
                bandwidth_Bps=1e12, copy_fraction=copy_fraction, tflops=tflops, **extra)


def run(sdpa, *paths):
    p = subprocess.run([sys.executable, script, "--sdpa", sdpa, *paths], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout


def check(cond, what, text):
    if not cond:
        print(f"FAIL: {what}\n{text}")
        sys.exit(1)


def target(out, name):
    for line in out.splitlines():
        if line.startswith(name + ":"):
            return line
    return ""


with tempfile.TemporaryDirectory() as d:
    def write(name, obj):
        path = os.path.join(d, name)
        with open(path, "w") as f:
            json.dump(obj, f)
        return path

    def report(softmax_fraction, flash_median, v1_median=2e-3, floor_l2=False):
        floor = meas("floor", 1e-4, 0.96, 0.0)
        if floor_l2:
            floor["output_fits_l2"] = True
            floor["copy_fraction"] = 1.4
        return {"device": {"copy": {"bandwidth_Bps": 4.3e12}}, "rows": [
            {"shape": {"seq_q": 4096, "head_dim": 64, "causal": False},
             "measurements": [meas("flash", flash_median, 0.1, 500.0, block_rows=128, block_cols=128, warps=4),
                              meas("flash_v1", v1_median, 0.1, 250.0, block_rows=128, block_cols=128, warps=8),
                              meas("softmax", 2e-3, softmax_fraction, 0.0), floor,
                              dict(kernel="standard", status="failed", reason="rel error 0.5 above 1e-2")]}]}

    sdpa = write("sdpa.json", {"results": [
        dict(backend="flash", seq=4096, head_dim=64, causal=False, status="ok", median_s=1.1e-3, tflops=450.0),
        dict(backend="cudnn", seq=4096, head_dim=64, causal=False, status="ok", median_s=0.9e-3, tflops=550.0)]})

    out = run(sdpa, write("good.json", report(0.92, 1.0e-3)))
    check("4.30 TB/s" in out, "copy ceiling", out)
    check("128×128×4w" in out and "128×128×8w" in out, "tiles and warps of both kernels", out)
    check("standard: failed: rel error 0.5" in out, "failed kernel listed", out)
    check(target(out, "FLASH V2 >= 1.0x PYTORCH FLASH").startswith("FLASH V2 >= 1.0x PYTORCH FLASH: MET (worst 1.10x"),
          "v2 met, ratio from median times", out)
    check(": MISSED (worst 0.55x at 4096x64" in target(out, "FLASH V1 >= 1.0x PYTORCH FLASH"), "v1 missed", out)
    check("not a target (worst 0.90x" in target(out, "FLASH V2 vs CUDNN"), "cuDNN shown, not judged", out)
    check(": MET (worst 0.92" in target(out, "SOFTMAX >= 0.90 COPY"), "softmax met", out)
    check(": MET (worst 0.96" in target(out, "FLOOR >= 0.95 COPY"), "floor met", out)

    out = run(sdpa, write("slow.json", report(0.85, 1.2e-3)))
    check(": MISSED (worst 0.92x" in target(out, "FLASH V2 >= 1.0x PYTORCH FLASH"), "v2 missed", out)
    check(": MISSED (worst 0.85" in target(out, "SOFTMAX >= 0.90 COPY"), "softmax missed", out)

    out = run(sdpa, write("l2.json", report(0.92, 1.0e-3, floor_l2=True)))
    check("NOT MEASURED (no shape with both figures; not judged (output fits in L2): 4096x64)"
          in target(out, "FLOOR >= 0.95 COPY"), "an L2-resident shape is not judged", out)
    check("1.40 (L2)" in out, "and is marked in the table", out)

    out = run(os.path.join(d, "absent.json"), write("good2.json", report(0.92, 1.0e-3)))
    check("missing or unreadable" in out and ": NOT MEASURED" in target(out, "FLASH V2 >= 1.0x PYTORCH FLASH"),
          "no peer: the flash targets are not measured", out)
    check(": MET" in target(out, "SOFTMAX >= 0.90 COPY"), "the copy targets still are", out)

    out = run(os.path.join(d, "absent.json"), os.path.join(d, "absent2.json"))
    lines = [target(out, n) for n in ("FLASH V2 >= 1.0x PYTORCH FLASH", "FLASH V1 >= 1.0x PYTORCH FLASH",
                                      "SOFTMAX >= 0.90 COPY", "FLOOR >= 0.95 COPY")]
    check(all(": NOT MEASURED" in l for l in lines) and " MET " not in out, "nothing measured", out)
    # Windowed reports: shown after the table, each kernel's time and model
    # bytes over the same kernel's on the full causal mask; not judged.
    full = report(0.92, 1.0e-3)
    full["rows"][0]["shape"]["causal"] = True
    for m in full["rows"][0]["measurements"]:
        m["model_bytes"] = 1e9
    win = {"rows": [
        {"shape": {"seq_q": 4096, "seq_kv": 4096, "head_dim": 64, "causal": True, "window": 1024},
         "measurements": [meas("flash", 0.4e-3, 0.1, 300.0, model_bytes=3e8),
                          dict(kernel="flash_v1", status="failed", reason="wrong result")]},
        {"shape": {"seq_q": 1, "seq_kv": 32768, "head_dim": 128, "causal": True, "window": 4096, "decode": True},
         "measurements": [meas("decode", 2e-5, 0.5, 0.0, model_bytes=4e7)]}]}
    out = run(sdpa, write("full-causal.json", full), "--window", write("window.json", win))
    check("4096x64 causal W=1024        flash" in out and "time 0.40x, bytes 0.30x of the full causal mask" in out,
          "windowed flash beside the full causal mask", out)
    check("flash_v1: failed: wrong result" in out, "a windowed kernel that failed is listed", out)
    check("decode 1x128 causal W=4096" in out and "1.00 TB/s" in out, "windowed decode with its bandwidth", out)
    out = run(sdpa, write("good3.json", report(0.92, 1.0e-3)), "--window", os.path.join(d, "absent-window.json"))
    check("missing or unreadable" in out and "Sliding windows" in out, "a missing windowed report is said", out)
print("device_summary: 7 cases passed")
