#!/usr/bin/env python3
"""Verdicts of scripts/device-check.d/56-counters.sh, from the files in --results.

COUNTERS VS NCU: `measure --counters` (CUPTI) reads beside Nsight Compute's
dram__bytes_read.sum for the same kernel and shape (counters-4096-d128.json
against step 50's reconcile-ours-4096-d128-c0.json, the median of its calls
per kind): MET when every kernel agrees within 5 %.
DECODE COUNTED VS MODEL: ncu's reads of our decode kernels through
`reconcile --decode` (reconcile-decode*-BxL.json), with CUPTI's beside them
(counters-decode-BxL.json): MET when reconcile read every capture; the reads
over the model and the verdicts are the figures.
DECODE COUNTERS VS NCU: CUPTI's reads of the same decode kernels within 5 % of
ncu's, every capture (a missing figure is MISSED).
"""
import argparse
import glob
import json
import os
import re
import statistics
import sys

TOLERANCE = 0.05


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def measurements(report):
    """(kernel, measurement) of every row of a measure report."""
    for row in (report or {}).get("rows", []):
        for m in row.get("measurements", []):
            yield m.get("kernel", "?"), m


def calls(report):
    return ((report or {}).get("reconcile") or {}).get("calls", [])


def mb(x):
    return "-" if x is None else f"{x / 1e6:.1f} MB"


def counters_vs_ncu(results):
    cupti = load(os.path.join(results, "counters-4096-d128.json"))
    ncu = load(os.path.join(results, "reconcile-ours-4096-d128-c0.json"))
    if cupti is None:
        return "COUNTERS VS NCU: NOT MEASURED (no counters-4096-d128.json: measure --counters did not finish)", []
    if ncu is None:
        return "COUNTERS VS NCU: NOT MEASURED (no reconcile-ours-4096-d128-c0.json from step 50)", []
    by_kind = {}
    for c in calls(ncu):
        r = (c.get("counted") or {}).get("read_bytes")
        if r:
            by_kind.setdefault(c.get("kind"), []).append(r)
    parts, lines, ok, seen = [], [], True, 0
    for kernel, m in measurements(cupti):
        status = m.get("counters", "")
        if status != "ok" or m.get("dram_read_bytes") is None:
            return (f"COUNTERS VS NCU: NOT MEASURED ({kernel}: {status or 'no counters in the report'})"[:300]), []
        ref = by_kind.get(kernel)
        if not ref:
            continue
        seen += 1
        n = statistics.median(ref)
        ratio = m["dram_read_bytes"] / n
        ok &= abs(ratio - 1) <= TOLERANCE
        parts.append(f"{kernel} {mb(m['dram_read_bytes'])} vs {mb(n)} = {ratio:.3f}x")
        lines.append(f"  {kernel:<10} CUPTI reads {mb(m['dram_read_bytes']):>10}, writes "
                     f"{mb(m.get('dram_write_bytes')):>10}; ncu reads {mb(n):>10}; CUPTI / ncu {ratio:.3f}")
    if seen == 0:
        return "COUNTERS VS NCU: NOT MEASURED (no kernel in both files)", []
    verdict = "MET" if ok else "MISSED"
    return (f"COUNTERS VS NCU (measure --counters vs ncu dram__bytes_read.sum, 4096 x d128, within 5 %): {verdict} "
            f"({'; '.join(parts)})"), lines


def decode_vs_model(results):
    files = sorted(glob.glob(os.path.join(results, "reconcile-decode*-*x*.json")))
    expected = 4
    parts, lines, cupti_parts, cupti_ok = [], [], [], True
    for f in files:
        m = re.search(r"reconcile-(decode(?:_paged)?)-(\d+x\d+)\.json$", f)
        if not m:
            continue
        kernel, bl = m.groups()
        cs = [c for c in calls(load(f)) if (c.get("counted") or {}).get("read_bytes")]
        if not cs:
            continue
        ratio = statistics.median(c.get("reads_over_model") or 0 for c in cs)
        reads = statistics.median(c["counted"]["read_bytes"] for c in cs)
        verdicts = sorted({c.get("verdict", "?") for c in cs})
        against = cs[0].get("judged_against", "?")
        cupti = None
        for k, meas in measurements(load(os.path.join(results, f"counters-decode-{bl}.json"))):
            if k == kernel and meas.get("counters") == "ok":
                cupti = meas.get("dram_read_bytes")
        parts.append(f"{kernel} {bl} {ratio:.2f}x {against} {'/'.join(verdicts)}")
        lines.append(f"  {kernel:<13} {bl:>9}: ncu reads {mb(reads):>10} = {ratio:.3f}x {against}"
                     f" ({'/'.join(verdicts)}); CUPTI reads {mb(cupti)}")
        if cupti is not None:
            cupti_parts.append(f"{kernel} {bl} {cupti / reads:.3f}x")
            cupti_ok &= abs(cupti / reads - 1) <= TOLERANCE
    n = len(parts)
    if n == 0:
        return "DECODE COUNTED VS MODEL: NOT MEASURED (no decode capture reconciled; see 56-counters.log)", []
    verdict = "MET" if n == expected else "MISSED"
    line = (f"DECODE COUNTED VS MODEL (ncu reads through reconcile --decode): {verdict} "
            f"({n} of {expected} captures; {'; '.join(parts)})")
    # measure --counters on the decode kernels beside ncu (a kernel without
    # CUPTI's figure: MISSED, as the first run found: decode ignored --counters).
    c_verdict = "MET" if cupti_ok and len(cupti_parts) == n else "MISSED"
    line += (f"\nDECODE COUNTERS VS NCU (measure --counters / ncu reads, within 5 %): {c_verdict} "
             f"({len(cupti_parts)} of {n} with CUPTI reads{'; ' if cupti_parts else ''}{'; '.join(cupti_parts)})")
    return line, lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", required=True)
    args = ap.parse_args()
    details = []
    for fn in (counters_vs_ncu, decode_vs_model):
        line, more = fn(args.results)
        print(line)
        details += more
    for d in details:
        print(d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
