#!/usr/bin/env bash
# `hbmscope reconcile` on real Nsight Compute output of our own H200 runs
# (tests/fixtures/ncu-h200, README.md there: GPU, driver, ncu version, the
# commands): our kernels and PyTorch SDPA's read what the model says, call by
# call, and our decode kernels (contiguous and paged, with their combine
# kernels) are found by name and judged against their variant. The ncu
# version's own quirks (a bare `decode_split_kernel<128, 1, 1>` name with no
# namespace, units scaled per column) are what these files hold and what the
# made-up fixtures could not.
source "$(dirname "$0")/lib.sh"
fx=$tests_dir/fixtures/ncu-h200
prefill=(--head-dim 128 --batch 4 --heads 16 --device h200)

verdicts() {  # FILE OPTIONS...: "kind verdict" per call, sorted and counted
  "$bin" reconcile "$@" --format json --output "$work/v.json" 2>/dev/null &&
    python3 -c "
import collections, json
r = json.load(open('$work/v.json'))['reconcile']
c = collections.Counter(k['kind'] + ' ' + k['verdict'] for k in r['calls'])
print(';'.join(f'{k}={v}' for k, v in sorted(c.items())), 'unmatched', sum(u['launches'] for u in r['unmatched']))"
}

got=$(verdicts "$fx/ours-4096-d128.csv" --seq 4096 "${prefill[@]}")
check "ours 4096: 3 standard, 3 flash at the floor, 3 floor, nothing unmatched ($got)" \
  test "$got" = "flash AT FLOOR=3;floor MATCHES=3;standard MATCHES=3 unmatched 0"
got=$(verdicts "$fx/ours-8192-d128-causal.csv" --seq 8192 --causal "${prefill[@]}")
check "ours 8192 causal: the same ($got)" \
  test "$got" = "flash AT FLOOR=3;floor MATCHES=3;standard MATCHES=3 unmatched 0"
"$bin" reconcile "$fx/ours-8192-d128-causal.csv" --seq 8192 --causal "${prefill[@]}" >"$work/t" 2>&1
check "ours 8192 causal: standard reads 1.01-1.02x the model (S and P larger than the L2)" \
  grep -qE "GEMM, softmax, GEMM \(3 kernels\) .* 1\.0[0-2]× standard" "$work/t"

# PyTorch SDPA: shapes from NVTX ranges; cuDNN and the efficient kernel at the
# floor, PyTorch's flash-attn 2 between (1.07-1.36x the floor's reads) except
# 4096 non-causal.
got=$(verdicts "$fx/sdpa-4096-8192-d128.csv" --device h200)
check "sdpa: 12 calls, 9 at the floor, 3 between ($got)" test "$got" = "flash AT FLOOR=9;flash BETWEEN=3 unmatched 0"
python3 - "$work/v.json" <<'PY' >"$work/p" 2>&1
import json, sys
calls = json.load(open(sys.argv[1]))["reconcile"]["calls"]
fa2 = [c for c in calls if "pytorch_flash" in c["kernels"][0]]
assert len(fa2) == 4, len(fa2)
over = sorted(round(c["reads_over_model"], 2) for c in fa2)
assert over[0] < 1.05 and over[-1] > 1.3, over
assert all(c["shape_from"].startswith("NVTX") or "nvtx" in c["shape_from"].lower() for c in calls), calls[0]["shape_from"]
PY
check "sdpa: PyTorch flash 1.03x to 1.36x the floor, shapes from NVTX ($(cat "$work/p"))" test ! -s "$work/p"

# Decode: our split kernel (and its combine) by name, each judged against its own variant.
dec=(--decode --seq 1 --heads 32 --kv-heads 8 --head-dim 128 --device h200)
for c in "decode 2 131072 decode_split" "decode_paged 2 131072 decode_paged" "decode 32 4096 decode_split" \
         "decode_paged 32 4096 decode_paged"; do
  read -r k b l want <<<"$c"
  page=(); [ "$k" = decode_paged ] && page=(--page-size 16)
  got=$(verdicts "$fx/$k-${b}x$l.csv" "${dec[@]}" --batch "$b" --seq-kv "$l" "${page[@]}")
  check "$k ${b}x$l: 3 split-KV calls, each MATCHES ($got)" test "$got" = "split_kv MATCHES=3 unmatched 0"
  check "$k ${b}x$l: judged against $want" \
    python3 -c "import json; r=json.load(open('$work/v.json'))['reconcile']; assert all(c['judged_against']=='$want' and abs(c['reads_over_model']-1)<0.01 for c in r['calls'])"
done
"$bin" reconcile "$fx/decode_paged-2x131072.csv" "${dec[@]}" --batch 2 --seq-kv 131072 --page-size 16 >"$work/t" 2>&1
check "paged decode: 14 splits from the heuristic, the combine kernel joined" \
  grep -q "14 split(s) from heuristic" "$work/t"
check "paged decode: the source named" grep -q "\[hbmscope decode (paged)\]" "$work/t"
finish
