#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on decode shapes: the peer of
`hbmscope measure --decode --kernels decode`.

Same problem as hbmscope's decode kernel: Q [batch, heads, seq_q, d] (seq_q new
tokens), K and V [batch, kv_heads, seq_kv, d], BF16, random inputs in [-1, 1),
GQA with enable_gqa=True (the flash backend's packed path: no K/V copies);
the same timing method: warm-up, then per sample an L2 flush (a buffer of at
least twice the L2 written, then read), CUDA events around one call, the
median of --repeats samples; plus a warm figure from back-to-back calls.
KV bytes = 2 * batch * kv_heads * seq_kv * d * 2 (K and V read once: what
papers quote). Each backend's output is checked against the math backend in
float32 on the first sequence. The JSON is rewritten after every shape, so a
step cut short by its time limit still leaves what it measured.

    python3 scripts/sdpa_decode_peer.py --shapes 32x4096 8x32768 --heads 32 --kv-heads 8 \\
        --head-dim 128 --json out.json
"""
import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}


def flush_l2(buf):
    buf.fill_(1)   # write pass
    buf.sum()      # read pass: evicts the lines the write left dirty


def time_call(fn, buf, repeats, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(repeats):
        flush_l2(buf)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) * 1e-3)
    start.record()
    for _ in range(repeats):
        fn()
    stop.record()
    stop.synchronize()
    return samples, start.elapsed_time(stop) * 1e-3 / repeats


def parse_shape(text):
    b, l = text.lower().split("x")
    return int(b), int(l)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", nargs="+", default=["32x4096", "8x32768", "1x131072"],
                    help="BATCHxCONTEXT pairs (default: %(default)s)")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--seq-q", type=int, default=1, help="new tokens per sequence (1-8)")
    ap.add_argument("--backends", nargs="+", default=["flash", "cudnn"], choices=sorted(BACKENDS))
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()

    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    l2 = getattr(props, "L2_cache_size", 0) or 64 * 2**20
    flush = torch.empty(max(2 * l2, 2**20) // 4 + 1, dtype=torch.float32, device=dev)
    gen = torch.Generator(device=dev).manual_seed(1)
    report = {"device": props.name, "torch": torch.__version__, "l2_bytes": l2, "results": []}

    def save():
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)

    h, hkv, d, nq = args.heads, args.kv_heads, args.head_dim, args.seq_q
    for text in args.shapes:
        b, l = parse_shape(text)
        q = (torch.rand((b, h, nq, d), generator=gen, device=dev) * 2 - 1).bfloat16()
        k = (torch.rand((b, hkv, l, d), generator=gen, device=dev) * 2 - 1).bfloat16()
        v = (torch.rand((b, hkv, l, d), generator=gen, device=dev) * 2 - 1).bfloat16()
        # Reference on the first sequence, float32, K/V heads repeated for the group.
        kr = k[:1].float().repeat_interleave(h // hkv, dim=1)
        vr = v[:1].float().repeat_interleave(h // hkv, dim=1)
        with sdpa_kernel([SDPBackend.MATH]):
            ref = F.scaled_dot_product_attention(q[:1].float(), kr, vr)
        del kr, vr
        kv_bytes = 2 * b * hkv * l * d * 2
        for name in args.backends:
            row = {"backend": name, "batch": b, "heads": h, "kv_heads": hkv, "seq_q": nq, "seq_kv": l,
                   "head_dim": d, "kv_bytes": kv_bytes}
            fn = lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)  # noqa: E731
            try:
                with sdpa_kernel([BACKENDS[name]]):
                    out = fn()
                    err = ((out[:1].float() - ref).norm() / ref.norm()).item()
                    samples, warm = time_call(fn, flush, args.repeats, args.warmup)
                med = statistics.median(samples)
                row.update(status="ok", rel_error=err, median_s=med, min_s=min(samples), max_s=max(samples),
                           warm_s=warm, samples_s=samples, kv_bandwidth_Bps=kv_bytes / med)
            except RuntimeError as e:  # backend not available for this shape or build
                row.update(status="skipped", reason=str(e).splitlines()[0][:200])
            report["results"].append(row)
            save()
            print(f"sdpa-decode {name:9s} B={b:4d} L={l:7d} "
                  + (f"{row['median_s']*1e6:9.1f} us {row['kv_bandwidth_Bps']/1e12:6.2f} TB/s KV "
                     f"err {row['rel_error']:.2e}" if row["status"] == "ok" else f"skipped: {row['reason']}"),
                  flush=True)
        del q, k, v, ref
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
