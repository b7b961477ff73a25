#!/usr/bin/env python3
"""The device check's targets and short table: our kernels from `hbmscope
measure --format json` reports next to PyTorch SDPA (scripts/sdpa_peer.py).

    python3 scripts/device_summary.py --sdpa sdpa.json measure.json [measure-causal.json ...] \
        [--window window-4096-causal.json window-decode.json]

First one line per target, "NAME: MET|MISSED|NOT MEASURED (figures)":
  FLASH V2 >= 1.0x PYTORCH FLASH   our default flash kernel; the speed ratio is
                                   PyTorch's median time over ours, per shape
  FLASH V1 >= 1.0x PYTORCH FLASH   the v1 layout, same shapes
  FLASH V2 vs CUDNN                shown, not judged (cuDNN is not the target)
  SOFTMAX >= 0.90 COPY             bandwidth over the measured device copy
  FLOOR >= 0.95 COPY
A target is MET when every shape measured meets it, MISSED when one does not
(the worst is named), NOT MEASURED when no shape has both figures. Shapes whose
output fits in the L2 ("output_fits_l2": bandwidth not HBM's) are shown with
"(L2)" and not judged. Then a table per shape, and the kernels that failed.
With --window, the windowed reports' kernels last (shown, not targets): median
time and model bytes, and for a prefill shape its time over the same kernel's
on the full causal mask (from the measure reports) beside the model's bytes
ratio, so that a window that does not skip its key blocks shows.
"""
import argparse
import json


def load(path):
    """A report, or None with a line saying why (a step of the check may have failed)."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"note: missing or unreadable: {path}: {e}")
        return None


def shape_name(s):
    return f"{s['seq_q']}x{s['head_dim']}{' causal' if s['causal'] else ''}"


def ok(m):
    return bool(m) and m.get("status") == "ok" and (m.get("time_s") or {}).get("median", 0) > 0


def verdict(name, per_shape, goal, unit, excluded=()):
    """per_shape: [(shape, value or None)]; MET if every value >= goal."""
    vals = [(s, v) for s, v in per_shape if v is not None]
    extra = f"; not judged (output fits in L2): {', '.join(excluded)}" if excluded else ""
    if not vals:
        return f"{name}: NOT MEASURED (no shape with both figures{extra})"
    worst = min(vals, key=lambda sv: sv[1])
    figures = ", ".join(f"{s} {unit.format(v)}" for s, v in vals)
    state = "MET" if worst[1] >= goal else "MISSED"
    return f"{name}: {state} (worst {unit.format(worst[1])} at {worst[0]}; {figures}{extra})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sdpa", required=True, help="sdpa_peer.py's JSON")
    ap.add_argument("reports", nargs="*", help="hbmscope measure --format json reports")
    ap.add_argument("--window", nargs="*", default=[], help="measure reports of windowed shapes (shown only)")
    args = ap.parse_args()

    sdpa = load(args.sdpa) or {"results": []}
    peer = {}
    for r in sdpa.get("results", []):
        if r.get("status") == "ok":
            peer[(r["seq"], r["head_dim"], r["causal"], r["backend"])] = r
    rows, copy_bw = [], None
    for path in args.reports:
        rep = load(path)
        if rep is None:
            continue
        copy = (rep.get("device") or {}).get("copy") or {}
        copy_bw = copy.get("bandwidth_Bps") or copy_bw
        for row in rep.get("rows", []):
            rows.append((row["shape"], {m["kernel"]: m for m in row.get("measurements", [])}))

    def speed(kernel, backend):
        out = []
        for s, ms in rows:
            m, p = ms.get(kernel), peer.get((s["seq_q"], s["head_dim"], s["causal"], backend))
            out.append((shape_name(s), p["median_s"] / m["time_s"]["median"] if ok(m) and p else None))
        return out

    def fraction(kernel):
        out, excluded = [], []
        for s, ms in rows:
            m = ms.get(kernel)
            if ok(m) and m.get("output_fits_l2"):
                excluded.append(shape_name(s))
                continue
            out.append((shape_name(s), m["copy_fraction"] if ok(m) and m.get("copy_fraction") else None))
        return out, excluded

    print(verdict("FLASH V2 >= 1.0x PYTORCH FLASH", speed("flash", "flash"), 1.0, "{:.2f}x"))
    print(verdict("FLASH V1 >= 1.0x PYTORCH FLASH", speed("flash_v1", "flash"), 1.0, "{:.2f}x"))
    line = verdict("FLASH V2 vs CUDNN", speed("flash", "cudnn"), 1.0, "{:.2f}x")
    print(line.replace(": MET (", ": shown, not a target (").replace(": MISSED (", ": shown, not a target ("))
    sm, sm_x = fraction("softmax")
    fo, fo_x = fraction("floor")
    print(verdict("SOFTMAX >= 0.90 COPY", sm, 0.90, "{:.2f}", sm_x))
    print(verdict("FLOOR >= 0.95 COPY", fo, 0.95, "{:.2f}", fo_x))

    def fmt(x, f="{:.1f}"):
        return "-" if x is None else f.format(x)

    print()
    print(f"copy ceiling: {fmt(copy_bw and copy_bw / 1e12, '{:.2f}')} TB/s (device-to-device, read + write)")
    head = ("shape", "v2 TF/s", "v2 tiles", "v1 TF/s", "v1 tiles", "torch flash", "cudnn", "v2/torch",
            "softmax copy", "floor copy", "standard TF/s")
    print("  ".join(f"{h:>13s}" for h in head))
    for s, ms in rows:
        key = (s["seq_q"], s["head_dim"], s["causal"])
        v2, v1, sm_m, fo_m, st = (ms.get(k, {}) for k in ("flash", "flash_v1", "softmax", "floor", "standard"))
        t_run, c_run = peer.get(key + ("flash",), {}), peer.get(key + ("cudnn",), {})
        ratio = t_run["median_s"] / v2["time_s"]["median"] if ok(v2) and t_run else None

        def tiles(m):
            if not m.get("block_rows"):
                return "-"
            return f"{m['block_rows']}×{m['block_cols']}" + (f"×{m['warps']}w" if m.get("warps") else "")

        def frac(m):
            if not ok(m):
                return "-"
            return fmt(m.get("copy_fraction"), "{:.2f}") + (" (L2)" if m.get("output_fits_l2") else "")

        cells = (shape_name(s), fmt(v2.get("tflops") if ok(v2) else None), tiles(v2),
                 fmt(v1.get("tflops") if ok(v1) else None), tiles(v1), fmt(t_run.get("tflops")),
                 fmt(c_run.get("tflops")), fmt(ratio, "{:.2f}"), frac(sm_m), frac(fo_m),
                 fmt(st.get("tflops") if ok(st) else None))
        print("  ".join(f"{c:>13s}" for c in cells))
    for s, ms in rows:
        for k, m in ms.items():
            if m.get("status") != "ok":
                print(f"    {shape_name(s)} {k}: {m.get('status')}: {m.get('reason')}")
    for r in sdpa.get("results", []):
        if r.get("status") != "ok":
            print(f"    {r['seq']}x{r['head_dim']}{' causal' if r['causal'] else ''} torch {r['backend']}: "
                  f"{r.get('status')}: {r.get('reason')}")
    windows(args.window, rows, fmt)
    return 0


def windows(paths, full_rows, fmt):
    """The windowed reports' kernels (shown, not targets)."""
    if not paths:
        return
    full = {}
    for s, ms in full_rows:
        if not s.get("window") and not s.get("decode"):
            for k, m in ms.items():
                full[(s["seq_q"], s["seq_kv"] if "seq_kv" in s else s["seq_q"], s["head_dim"], s["causal"], k)] = m
    print()
    print("Sliding windows (shown, not targets): median, model bytes; prefill: time and bytes over the full causal mask")
    for path in paths:
        rep = load(path)
        if rep is None:
            continue
        for row in rep.get("rows", []):
            s = row["shape"]
            name = ("decode " if s.get("decode") else "") + shape_name(s) + f" W={s.get('window', 0)}"
            for m in row.get("measurements", []):
                if not ok(m):
                    print(f"    {name} {m['kernel']}: {m.get('status')}: {m.get('reason')}")
                    continue
                t, b = m["time_s"]["median"], m.get("model_bytes", 0)
                line = f"  {name:>28s} {m['kernel']:>12s} {fmt(t * 1e6)} µs  {fmt(b / 1e6)} MB"
                f = full.get((s["seq_q"], s.get("seq_kv", s["seq_q"]), s["head_dim"], s["causal"], m["kernel"]))
                if ok(f) and f.get("model_bytes"):
                    line += (f"  time {t / f['time_s']['median']:.2f}x, bytes {b / f['model_bytes']:.2f}x"
                             " of the full causal mask")
                elif m.get("bandwidth_Bps"):
                    line += f"  {fmt(m['bandwidth_Bps'] / 1e12, '{:.2f}')} TB/s"
                print(line)


if __name__ == "__main__":
    raise SystemExit(main())
