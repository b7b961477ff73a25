#!/usr/bin/env python3
"""scripts/decode_summary.py on made-up reports: the two targets judged from the
figures (KV bytes from the shape, the copy bandwidth of the report, PyTorch's
flash median), shapes under 256K tokens left out of the bandwidth verdict, a
failed kernel making it MISSED, and missing inputs 'NOT MEASURED'."""
import json
import os
import subprocess
import sys
import tempfile

script = sys.argv[1]


def check(cond, what, text):
    if not cond:
        print(f"FAIL: {what}\n{text}")
        sys.exit(1)


def run(*args):
    p = subprocess.run([sys.executable, script, *args], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout


def shape(b, l):
    return {"decode": True, "batch": b, "seq_kv": l, "heads": 32, "kv_heads": 8, "head_dim": 128, "seq_q": 1}


def kv(b, l):
    return 2 * 8 * 128 * 2 * b * l


def meas(kernel, median, status="ok"):
    return {"kernel": kernel, "status": status, "reason": "" if status == "ok" else "wrong result",
            "time_s": {"median": median}, "splits": 1, "page_size": 16 if kernel == "decode_paged" else 0,
            "rel_error": 3e-3}


with tempfile.TemporaryDirectory() as d:
    def write(name, obj):
        path = os.path.join(d, name)
        with open(path, "w") as f:
            json.dump(obj, f)
        return path

    copy = 4.0e12
    # 64x4096 (256K tokens) at 85 % of copy, paged at 75 %; 32x4096 (128K) at 50 %: not judged.
    t64 = kv(64, 4096) / (0.85 * copy)
    rep = write("m.json", {"device": {"copy": {"bandwidth_Bps": copy}}, "rows": [
        {"shape": shape(64, 4096), "measurements": [meas("decode", t64),
                                                    meas("decode_paged", kv(64, 4096) / (0.75 * copy))]},
        {"shape": shape(32, 4096), "measurements": [meas("decode", kv(32, 4096) / (0.5 * copy)),
                                                    meas("decode_paged", 1e-3)]},
    ]})
    sdpa = write("s.json", {"results": [
        dict(backend="flash", batch=64, seq_kv=4096, heads=32, kv_heads=8, head_dim=128, seq_q=1, status="ok",
             median_s=t64 * 1.1),
        dict(backend="cudnn", batch=64, seq_kv=4096, heads=32, kv_heads=8, head_dim=128, seq_q=1, status="ok",
             median_s=t64 * 0.5),
    ]})
    out = run("--sdpa", sdpa, rep)
    check("decode-kv-bandwidth: MET" in out and "85.0%" in out, "85 % of copy is MET", out)
    check("decode-paged-kv-bandwidth: MISSED" in out and "75.0%" in out, "75 % of copy is MISSED", out)
    check("50.0%" not in out.split("\n")[0], "a shape under 256K tokens is not judged", out)
    check("decode-vs-pytorch: MET" in out and "1.10x" in out, "flash slower than ours is MET (cuDNN ignored)", out)

    # A failed kernel on a judged shape: MISSED, named.
    rep2 = write("m2.json", {"device": {"copy": {"bandwidth_Bps": copy}}, "rows": [
        {"shape": shape(64, 4096), "measurements": [meas("decode", t64)]},
        {"shape": shape(8, 32768), "measurements": [meas("decode", 0, status="failed")]},
    ]})
    out = run("--sdpa", write("s2.json", {"results": [dict(
        backend="flash", batch=64, seq_kv=4096, heads=32, kv_heads=8, head_dim=128, seq_q=1, status="ok",
        median_s=t64 * 0.9)]}), rep2)
    check("decode-kv-bandwidth: MISSED" in out and "not ok: 8x32768" in out, "a failed shape is MISSED", out)
    check("decode-vs-pytorch: MISSED" in out and "0.90x" in out, "slower than torch is MISSED", out)
    check("decode-paged-kv-bandwidth: NOT MEASURED" in out, "no paged run: NOT MEASURED", out)

    # Nothing at all: every target NOT MEASURED, and the missing files are said.
    out = run("--sdpa", os.path.join(d, "missing.json"), os.path.join(d, "missing-measure.json"))
    check(out.count("NOT MEASURED") == 3, "three NOT MEASURED lines", out)
    check("missing-measure.json: not read" in out, "the missing report is named", out)
print("ok")
