#!/usr/bin/env python3
"""The decode step's verdicts, from `hbmscope measure --decode --format json`
reports and scripts/sdpa_decode_peer.py's JSON.

    python3 scripts/decode_summary.py --sdpa sdpa-decode.json measure-a.json measure-b.json

Prints one line per target, `NAME: MET|MISSED|NOT MEASURED (figures)`:
  decode-kv-bandwidth: our decode kernel (contiguous cache) moves KV bytes at
      >= 80 % of the measured device-to-device copy bandwidth on every shape with
      B*L (sum of context lengths) >= 256K tokens;
  decode-paged-kv-bandwidth: the same for decode_paged;
  decode-vs-pytorch: our decode kernel is at least as fast (1.0x) as PyTorch SDPA's
      flash backend on every shape both ran.
KV bytes = 2 * kv_heads * head_dim * 2 (bf16) * sum_b L_b: the cache read once
(what papers quote), not the model's total. Then one line per shape and kernel.
"""
import argparse
import json
import sys

MIN_TOKENS = 256 * 1024
BW_TARGET = 0.80


def kv_bytes(shape):
    lengths = shape.get("context_lengths") or [shape["seq_kv"]] * shape["batch"]
    return 2 * shape["kv_heads"] * shape["head_dim"] * 2 * sum(lengths), sum(lengths)


def key(shape):
    return (shape["batch"], shape["seq_kv"], shape["heads"], shape["kv_heads"], shape["head_dim"], shape["seq_q"])


def label(k):
    return f"{k[0]}x{k[1]}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sdpa", help="scripts/sdpa_decode_peer.py's JSON")
    ap.add_argument("reports", nargs="*", help="hbmscope measure JSON reports")
    args = ap.parse_args()

    ours = {}  # (kernel, key) -> dict
    notes = []
    for path in args.reports:
        try:
            with open(path) as f:
                rep = json.load(f)
        except (OSError, ValueError) as e:
            notes.append(f"# {path}: not read ({e})")
            continue
        copy_bw = ((rep.get("device") or {}).get("copy") or {}).get("bandwidth_Bps") or 0
        for row in rep.get("rows", []):
            s = row.get("shape", {})
            if not s.get("decode"):
                continue
            kvb, tokens = kv_bytes(s)
            for m in row.get("measurements", []):
                if m.get("kernel") not in ("decode", "decode_paged"):
                    continue
                med = (m.get("time_s") or {}).get("median") or 0
                ours[(m["kernel"], key(s))] = dict(
                    status=m.get("status"), reason=m.get("reason", ""), median=med, kv_bytes=kvb, tokens=tokens,
                    copy_bw=copy_bw, splits=m.get("splits"), page=m.get("page_size"), err=m.get("rel_error"),
                    frac=(kvb / med / copy_bw) if med > 0 and copy_bw > 0 else None)

    torch_rows = {}
    if args.sdpa:
        try:
            with open(args.sdpa) as f:
                for r in json.load(f).get("results", []):
                    if r.get("backend") == "flash":
                        k = (r["batch"], r["seq_kv"], r["heads"], r["kv_heads"], r["head_dim"], r["seq_q"])
                        torch_rows[k] = r
        except (OSError, ValueError) as e:
            notes.append(f"# {args.sdpa}: not read ({e})")

    lines = []
    for kernel, name in (("decode", "decode-kv-bandwidth"), ("decode_paged", "decode-paged-kv-bandwidth")):
        big = [(k, v) for (kn, k), v in sorted(ours.items()) if kn == kernel and v["tokens"] >= MIN_TOKENS]
        done = [(k, v) for k, v in big if v["status"] == "ok" and v["frac"] is not None]
        if not done:
            why = "; ".join(f"{label(k)} {v['status']}: {v['reason']}" for k, v in big) or (
                "no shape with B*L >= 256K" if ours else "no hbmscope measure report read")
            lines.append(f"{name}: NOT MEASURED ({kernel}: {why})")
            continue
        worst = min(v["frac"] for _, v in done)
        failed = [k for k, v in big if v["status"] != "ok"]
        verdict = "MET" if worst >= BW_TARGET and not failed else "MISSED"
        figs = ", ".join(f"{label(k)} {v['kv_bytes'] / v['median'] / 1e12:.2f} TB/s = {100 * v['frac']:.1f}%"
                         for k, v in done)
        extra = f"; not ok: {', '.join(label(k) for k in failed)}" if failed else ""
        lines.append(f"{name}: {verdict} ({kernel}, KV bytes / median vs copy {done[0][1]['copy_bw'] / 1e12:.2f} "
                     f"TB/s, B*L >= 256K: worst {100 * worst:.1f}% (target 80%); {figs}{extra})")

    pairs = []
    for (kn, k), v in sorted(ours.items()):
        t = torch_rows.get(k)
        if kn == "decode" and v["status"] == "ok" and v["median"] > 0 and t and t.get("status") == "ok":
            pairs.append((k, t["median_s"] / v["median"], v["median"], t["median_s"]))
    if not pairs:
        skipped = "; ".join(f"{label(k)}: {t.get('reason', t.get('status'))}" for k, t in sorted(torch_rows.items())
                            if t.get("status") != "ok")
        lines.append("decode-vs-pytorch: NOT MEASURED (no shape timed by both our decode kernel and SDPA flash"
                     + (f"; torch: {skipped}" if skipped else "") + ")")
    else:
        worst = min(p[1] for p in pairs)
        figs = ", ".join(f"{label(k)} {ours_t * 1e6:.1f} vs {torch_t * 1e6:.1f} us = {r:.2f}x"
                         for k, r, ours_t, torch_t in pairs)
        lines.append(f"decode-vs-pytorch: {'MET' if worst >= 1.0 else 'MISSED'} (PyTorch SDPA flash time / ours, "
                     f"worst {worst:.2f}x (target 1.0x); {figs})")

    for line in lines:
        print(line)
    for (kn, k), v in sorted(ours.items()):
        figs = (f"{v['median'] * 1e6:.1f} us, {v['kv_bytes'] / v['median'] / 1e12:.2f} TB/s KV"
                if v["status"] == "ok" and v["median"] > 0 else f"{v['status']}: {v['reason']}")
        print(f"# {kn:12s} B={k[0]} L={k[1]} H={k[2]}/{k[3]} d={k[4]} Nq={k[5]} splits {v['splits']} "
              f"page {v['page']}: {figs}, error {v['err']}")
    for n in notes:
        print(n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
