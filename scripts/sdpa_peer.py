#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention as the peer of `hbmscope measure`.

Same shapes ([batch, heads, seq, head_dim], BF16, random inputs in [-1, 1)) and
the same timing method as hbmscope: warm-up, then per sample an L2 flush (a
buffer of at least twice the L2 written, then read), CUDA events around one
call, the median of --repeats samples; plus a warm figure from back-to-back
calls. FLOPs = 4*B*H*N^2*d, halved when causal. Each backend's output is
checked against the math backend in float32 on the first (batch, head).

    python3 scripts/sdpa_peer.py --seq 4096 8192 --head-dim 64 128 --batch 4 --heads 16 --json out.json
"""
import argparse
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}


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
    warm = start.elapsed_time(stop) * 1e-3 / repeats
    return samples, warm


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seq", type=int, nargs="+", default=[4096, 8192])
    ap.add_argument("--head-dim", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()

    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    l2 = getattr(props, "L2_cache_size", 0) or 64 * 2**20
    flush = torch.empty(max(2 * l2, 2**20) // 4 + 1, dtype=torch.float32, device=dev)
    gen = torch.Generator(device=dev).manual_seed(1)
    results = []
    for n in args.seq:
        for d in args.head_dim:
            for causal in (False, True):
                shape = (args.batch, args.heads, n, d)
                q, k, v = (torch.rand(shape, generator=gen, device=dev, dtype=torch.float32) * 2 - 1 for _ in range(3))
                q, k, v = q.bfloat16(), k.bfloat16(), v.bfloat16()
                ref = F.scaled_dot_product_attention(q[:1, :1].float(), k[:1, :1].float(), v[:1, :1].float(),
                                                     is_causal=causal)
                flops = 4 * args.batch * args.heads * n * n * d // (2 if causal else 1)
                for name, backend in BACKENDS.items():
                    row = {"backend": name, "batch": args.batch, "heads": args.heads, "seq": n, "head_dim": d,
                           "causal": causal, "flops": flops}
                    fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
                    try:
                        with sdpa_kernel([backend]):
                            out = fn()
                            err = ((out[:1, :1].float() - ref).norm() / ref.norm()).item()
                            samples, warm = time_call(fn, flush, args.repeats, args.warmup)
                        med = statistics.median(samples)
                        row.update(status="ok", rel_error=err, median_s=med, min_s=min(samples), max_s=max(samples),
                                   warm_s=warm, samples_s=samples, tflops=flops / med / 1e12)
                    except RuntimeError as e:  # backend not available for this shape or build
                        row.update(status="skipped", reason=str(e).splitlines()[0][:200])
                    results.append(row)
                    write_json(args.json, props.name, l2, results)  # after every shape: a timeout loses one
                    print(f"sdpa {name:5s} N={n:5d} d={d:3d} causal={int(causal)} "
                          + (f"{row['median_s']*1e3:8.3f} ms {row['tflops']:7.1f} TFLOP/s err {row['rel_error']:.2e}"
                             if row["status"] == "ok" else f"skipped: {row['reason']}"), flush=True)
                del q, k, v
    write_json(args.json, props.name, l2, results, complete=True)
    return 0


def write_json(path, device, l2, results, complete=False):
    """The whole file, replaced atomically (a reader never sees half of it)."""
    doc = {"device": device, "torch": torch.__version__, "l2_bytes": l2, "results": results,
           "complete": complete, "cudnn": torch.backends.cudnn.version()}
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
