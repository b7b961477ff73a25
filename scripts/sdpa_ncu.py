#!/usr/bin/env python3
"""PyTorch SDPA's backends (flash, cuDNN, efficient, math) for Nsight Compute.

Each measured call sits in an NVTX range named for `hbmscope reconcile`
(hbmscope:seq=...,d=...,heads=...,batch=...,causal=...) and between
cudaProfilerStart/Stop, so that `ncu --profile-from-start off --nvtx` profiles
exactly the measured calls (warm-up runs stay outside) and reconcile reads
each call's shape from its range:

    ncu --csv --page raw --clock-control none --profile-from-start off --nvtx \\
        --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \\
        python3 scripts/sdpa_ncu.py --seq 4096 8192 --head-dim 128 > sdpa.csv
    hbmscope reconcile sdpa.csv --device h200
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seq", type=int, nargs="+", default=[4096, 8192])
    ap.add_argument("--head-dim", type=int, nargs="+", default=[128])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--causal", choices=["0", "1", "both"], default="both")
    ap.add_argument("--backends", nargs="+", default=list(BACKENDS))
    args = ap.parse_args()
    causals = [False, True] if args.causal == "both" else [args.causal == "1"]
    dev = torch.device("cuda")
    for n in args.seq:
        for d in args.head_dim:
            for causal in causals:
                q, k, v = (torch.randn(args.batch, args.heads, n, d, device=dev, dtype=torch.bfloat16) for _ in range(3))
                name = f"hbmscope:seq={n},d={d},heads={args.heads},batch={args.batch},causal={int(causal)}"
                for backend in args.backends:
                    try:
                        with sdpa_kernel([BACKENDS[backend]]):
                            F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # warm-up, not profiled
                            torch.cuda.synchronize()
                            torch.cuda.profiler.start()
                            torch.cuda.nvtx.range_push(name)
                            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                            torch.cuda.nvtx.range_pop()
                            torch.cuda.synchronize()
                            torch.cuda.profiler.stop()
                        print(f"sdpa {backend} {name}: ok", file=sys.stderr, flush=True)
                    except RuntimeError as e:  # backend not available for this shape or build
                        print(f"sdpa {backend} {name}: skipped: {str(e).splitlines()[0][:160]}", file=sys.stderr,
                              flush=True)
                del q, k, v
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
