#!/usr/bin/env bash
# Whole models on the command line: `models`, --model-config on model and
# sweep, every format, shards and merge, compare, and one-line refusals.
source "$(dirname "$0")/lib.sh"

# `hbmscope models`: every shipped model and its pattern, one in full.
"$bin" models >"$work/models"
check "models exits 0" test $? -eq 0
for m in llama-3.1-8b llama-3.1-70b mistral-7b-v0.1 gemma-2-9b gemma-3-27b qwen3-8b deepseek-v3 gpt-oss-120b llama-4-scout; do
  check "models lists $m" grep -q "^$m " "$work/models"
done
check "models: gemma 3 counts" grep -q "gemma-3-27b  *52 sliding (W 1024) + 10 full  *32/16" "$work/models"
check "models: gemma 3 pattern" grep -q "(5 sliding, 1 full) × 10, 2 sliding" "$work/models"
check "models: scout" grep -q "36 chunked (C 8192) + 12 full" "$work/models"
check "models fits 120 columns" test "$(maxw "$work/models")" -le 120
"$bin" models deepseek-v3 >"$work/ds"
check "models NAME: source" grep -q "Source: https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json" "$work/ds"
check "models NAME: notes" grep -q "absorbed form" "$work/ds"
"$bin" models --format json >"$work/models.json"
check "models json" python3 -c "
import json; d=json.load(open('$work/models.json')); assert len(d)==9
g={m['id']: m for m in d}
assert g['gemma-3-27b']['layer_attention'].count('sliding')==52
assert g['deepseek-v3']['mla']['kv_lora_rank']==512 and g['deepseek-v3']['kv_bytes_per_token']==61*576*2
assert g['llama-3.1-8b']['kv_bytes_per_token']==32*8*256*2"
"$bin" models --format csv >"$work/models.csv"
check "models csv" test "$(wc -l <"$work/models.csv")" -eq 10
cat >"$work/my.json" <<'EOF'
{"model_type": "mistral", "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
 "hidden_size": 1024, "sliding_window": 256, "torch_dtype": "float16", "vocab_size": 32000}
EOF
"$bin" models "$work/my.json" >"$work/mine"
check "models FILE" grep -q "4 sliding (W 256)" "$work/mine"

# A decode step of three models: a row per kind and a total, in every format.
args=(model --model-config llama-3.1-8b,gemma-3-27b,deepseek-v3 --decode --batch 32 --seq-kv 32K --device h200)
"$bin" "${args[@]}" >"$work/t" 2>"$work/err"
check "decode step exits 0" test $? -eq 0
check "decode step: no stderr" test ! -s "$work/err"
check "table: kinds and totals" grep -q "gemma-3-27b  *52 sliding (W 1024)" "$work/t"
check "table: total line" grep -q "deepseek-v3  *61 total" "$work/t"
check "table: KV cache column" grep -q "KV cache" "$work/t"
check "table: whole-model title" grep -q "^Whole models: a row per kind of layer" "$work/t"
"$bin" "${args[@]}" --format json >"$work/d.json"
check "json: rows and model objects" python3 -c "
import json; d=json.load(open('$work/d.json')); r=d['rows']
assert [x['model']['layer_kind'] for x in r]==['full','total','sliding','full','total','mla','total'], r
t={x['model']['config']: x for x in r if x['model']['layer_kind']=='total'}
assert t['llama-3.1-8b']['model']['kv_cache']['bytes']==32*8*256*2*32*32768
assert t['gemma-3-27b']['model']['kv_cache']['bytes']==(52*1024+10*32768)*32*16*256*2
assert t['deepseek-v3']['model']['kv_cache']['bytes']==61*576*2*32*32768
g=[x for x in r if x['model']['config']=='gemma-3-27b']
for v in g[2]['bytes']: assert g[2]['bytes'][v]==g[0]['bytes'][v]+g[1]['bytes'][v], v
s=g[0]['prediction']['decode_split']['seconds']+g[1]['prediction']['decode_split']['seconds']
assert abs(g[2]['prediction']['decode_split']['seconds']-s)<=1e-12*s
ds=[x for x in r if x['model']['config']=='deepseek-v3'][0]['shape']
assert ds['heads']==128 and ds['kv_heads']==1 and ds['head_dim']==576, ds"
"$bin" "${args[@]}" --format csv >"$work/d.csv"
check "csv: model columns" grep -q "model_config,layer_kind,layers,kv_bytes_per_token,kv_cache_tokens,kv_cache_bytes" "$work/d.csv"
check "csv: 7 rows" test "$(wc -l <"$work/d.csv")" -eq 8
"$bin" "${args[@]}" --format md >"$work/d.md"
check "md: model rows" grep -q "| gemma-3-27b | 62 total |" "$work/d.md"

# A prefill, the model's dtype, and --dtype over it.
"$bin" model --model-config gpt-oss-120b --seq 8K --format json >"$work/p.json"
check "prefill: sliding and full kinds" python3 -c "
import json; r=json.load(open('$work/p.json'))['rows']
assert [x['model']['layer_kind'] for x in r]==['sliding','full','total']
assert r[0]['model']['layers']==18 and r[0]['shape']['heads']==64 and r[0]['shape']['head_dim']==64
assert r[0]['shape']['dtype']=='bf16' and r[0]['model']['kv_cache']['tokens']==8192"
"$bin" model --model-config qwen3-8b --seq 1K --dtype fp8 --format json >"$work/q.json"
check "--dtype over torch_dtype" python3 -c "
import json; r=json.load(open('$work/q.json'))['rows']; assert r[0]['shape']['dtype']=='fp8'"
"$bin" model --model-config "$work/my.json" --decode --context-lengths 100,300,5000 --format json >"$work/m.json"
check "a file, a ragged decode batch" python3 -c "
import json; r=json.load(open('$work/m.json'))['rows']
assert r[0]['shape']['dtype']=='fp16'
assert r[0]['model']['kv_cache']['tokens']==100+256+256, r[0]['model']"

# Sweeps: the axis from the command line and from a config file; shards merge
# back to the whole; compare matches on model_config and layer_kind.
cat >"$work/s.json" <<'EOF'
{"schema": "hbmscope.sweep/1",
 "axes": {"decode": true, "batch": [1, 32], "seq_kv": "4K,32K"},
 "groups": [{"label": "serving", "model_config": ["llama-3.1-8b", "gemma-3-27b", "my.json"]},
            {"label": "plain", "seq": 1, "heads": 32, "kv_heads": 8, "head_dim": 128}]}
EOF
"$bin" sweep --config "$work/s.json" --device h200 --format json --output "$work/all.json" 2>/dev/null
check "sweep config: model groups" python3 -c "
import json; r=json.load(open('$work/all.json'))['rows']
assert len(r)==4*(2+3+2)+4, len(r)
assert {x['model']['config'] for x in r if 'model' in x}=={'llama-3.1-8b','gemma-3-27b','$work/my.json'}"
for i in 1 2 3; do
  "$bin" sweep --config "$work/s.json" --device h200 --shard $i/3 --format json --output "$work/p$i.json" 2>/dev/null
done
"$bin" merge "$work/p1.json" "$work/p2.json" "$work/p3.json" --output "$work/merged.json" 2>/dev/null
check "shards merge to the whole" python3 -c "
import json; a=json.load(open('$work/all.json')); m=json.load(open('$work/merged.json')); assert a['rows']==m['rows']"
"$bin" merge "$work/p1.json" "$work/p2.json" --output "$work/part.json" 2>"$work/err"
check "merge counts rows, not points" grep -q "of 32 rows" "$work/err"
"$bin" compare "$work/all.json" "$work/merged.json" --format json >"$work/c.json"
check "compare matches every row" python3 -c "
import json; c=json.load(open('$work/c.json')); assert len(c['rows'])==32 and not c['only_in_a'] and not c['only_in_b'], c.keys()"
"$bin" sweep --model-config llama-3.1-8b,mistral-7b-v0.1 --seq 1K,4K --format csv >"$work/s.csv"
check "sweep --model-config: (1+1) x 2 x 2 rows" test "$(wc -l <"$work/s.csv")" -eq 9
"$bin" sweep --config decode --model-config qwen3-8b --batch 1 --seq-kv 4K --format json >"$work/sd.json"
check "--model-config replaces a config's models" python3 -c "
import json; r=json.load(open('$work/sd.json'))['rows']; assert r and all(x['model']['config']=='qwen3-8b' for x in r)"

# Refusals: one line, exit 2 for a malformed command line, 1 for a file or name refused.
expect_exit "unknown model" 1 "--model-config: 'llama-9' is not a shipped model" model --model-config llama-9 --seq 1K
expect_exit "--heads with a model" 2 "--heads: the model config gives it" model --model-config llama-3.1-8b --seq 1K --heads 8
expect_exit "--head-dim with a model" 2 "--head-dim: the model config gives it" model --model-config qwen3-8b --seq 1K --head-dim 64
expect_exit "no step" 2 "--model-config: give the step" model --model-config qwen3-8b
expect_exit "model named twice" 2 "'qwen3-8b' is named twice" model --model-config qwen3-8b,Qwen3-8B --seq 1K
expect_exit "sweep --measure" 2 "--measure: whole-model rows" sweep --model-config qwen3-8b --seq 1K --measure
expect_exit "models: unknown" 1 "models: 'nope' is not a shipped model" models nope
expect_exit "models --format" 2 "--format: 'yaml'" models --format yaml
printf '{"model_type": "qwen3_next", "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64, "layer_types": ["linear_attention", "full_attention"]}' >"$work/next.json"
expect_exit "unknown layer type" 1 "layer_types[0]: 'linear_attention' is not a layer type" model --model-config "$work/next.json" --seq 1K
printf '{"num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 3, "head_dim": 64}' >"$work/bad.json"
expect_exit "inconsistent heads" 1 "num_key_value_heads: 3 does not divide num_attention_heads (8)" models "$work/bad.json"
printf '{"num_hidden_layers": 2, "num_hidden_layers": 3}' >"$work/dup.json"
expect_exit "repeated key" 1 "num_hidden_layers" models "$work/dup.json"
printf '{"schema": "hbmscope.sweep/1", "groups": [{"model_config": "qwen3-8b", "seq": 1024, "heads": 8}]}' >"$work/sh.json"
expect_exit "sweep config: heads in a model group" 1 "groups[0].heads: the model config gives it" sweep --config "$work/sh.json"
printf '{"schema": "hbmscope.sweep/1", "groups": [{"model_config": ["qwen3-8b"]}]}' >"$work/ns.json"
expect_exit "sweep config: no step" 1 "needs 'seq' or 'seq_lens' (a prefill) or" sweep --config "$work/ns.json"
cp "$work/my.json" "$work/keep.json"
expect_exit "--output is the model's config.json" 1 "is also an input of this run" model --model-config "$work/my.json" --seq 1K --output "$work/my.json"
check "the config.json is untouched" cmp -s "$work/my.json" "$work/keep.json"
expect_exit "sweep --output is a model file" 1 "is also an input of this run" sweep --config "$work/s.json" --output "$work/my.json"
"$bin" model --model-config gemma-3-27b --seq 4K --output "$work/x.json" 2>/dev/null
check "--output json" python3 -c "import json; json.load(open('$work/x.json'))"
# A ragged prefill batch through whole models (--seq-lens): a row per kind, the total their sum.
"$bin" model --model-config gemma-3-27b,llama-3.1-8b --seq-lens 512,4K,2K:8K --format json >"$work/rg.json" 2>"$work/err"
check "--seq-lens with --model-config" python3 -c "
import json; d=json.load(open('$work/rg.json')); rows=d['rows']; assert len(rows)==5
g=rows[:3]; assert [r['model']['layer_kind'] for r in g]==['sliding','full','total']
for r in rows: assert r['shape']['seq_lens']==[[512,512],[4096,4096],[2048,8192]], r['shape']
for v in g[2]['bytes']: assert g[2]['bytes'][v]==g[0]['bytes'][v]+g[1]['bytes'][v], v
assert g[2]['flops']==g[0]['flops']+g[1]['flops']
# by hand: the sliding layers' keys per sequence 512 + 4096 + 3071, 16 kv heads x 256 x 2 B, 52 layers
assert g[0]['model']['kv_cache']['tokens']==7679 and g[0]['model']['kv_cache']['bytes']==7679*8192*52
assert g[0]['flops']==5899008*512*32*52
assert g[2]['model']['mask']=='mixed' and 'window' not in g[2]['shape']"
"$bin" sweep --model-config gemma-3-27b --seq-lens 512,4K --format csv >"$work/rg.csv" 2>/dev/null
check "sweep --model-config --seq-lens" test "$(wc -l <"$work/rg.csv")" -eq 4
printf '{"schema": "hbmscope.sweep/1", "groups": [{"model_config": "qwen3-8b", "seq_lens": [[512, "1K:4K"]]}]}' >"$work/rgc.json"
"$bin" sweep --config "$work/rgc.json" --format csv >"$work/rgc.csv" 2>/dev/null
check "sweep config: seq_lens in a model group" grep -q "qwen3-8b,total" "$work/rgc.csv"
printf '{"schema": "hbmscope.sweep/1", "groups": [{"model_config": "qwen3-8b", "seq": 1024, "window": 128}]}' >"$work/wc.json"
expect_exit "sweep config: window in a model group" 1 "groups[0].window: the model config gives it" sweep --config "$work/wc.json"
expect_exit "--window with a model" 2 "--window: the model config gives it" model --model-config qwen3-8b --seq 1K --window 128 --causal
# The total's mask: mixed where its kinds differ, in every format.
"$bin" model --model-config gemma-3-27b --seq 32K --device h200 >"$work/mx" 2>/dev/null
check "table: total's mask is mixed" grep -qE "^gemma-3-27b +62 total +32768 × 128 +mixed " "$work/mx"
check "table: no total with a window" test "$(grep -c "total .*window" "$work/mx")" -eq 0
"$bin" model --model-config gemma-3-27b --seq 32K --format csv >"$work/mx.csv"
check "csv: mask column" python3 -c "
import csv; r=list(csv.DictReader(open('$work/mx.csv'))); assert [x['mask'] for x in r]==['','','mixed'] and r[2]['window']=='0'"
"$bin" model --model-config gemma-3-27b --seq 32K --format md >"$work/mx.md"
check "md: mixed" grep -q "| gemma-3-27b | 62 total | 32768 × 128 | mixed |" "$work/mx.md"
# The L2 simulation on whole-model rows: each kind simulated once, times its layers; the total the sum.
"$bin" model --model-config gemma-3-27b,deepseek-v3 --seq 2K --l2-bytes 50M --format json >"$work/l2.json" 2>"$work/err"
check "--l2-bytes with a model: no note" test ! -s "$work/err"
check "--l2-bytes with a model" python3 -c "
import json; d=json.load(open('$work/l2.json')); rows=d['rows']
g=rows[:3]
for r in g[:2]: assert r['l2_sim']['l2_bytes']==50<<20 and r['bytes']['flash_l2_sim']>=r['bytes']['floor']
assert 'l2_sim' not in g[2]
for v in ('flash_l2_sim','standard_l2_sim'): assert g[2]['bytes'][v]==g[0]['bytes'][v]+g[1]['bytes'][v]"
"$bin" model --model-config gemma-3-27b --decode --batch 8 --seq-kv 8K --device h200 --format json >"$work/l2d.json" 2>"$work/err"
check "--device: decode simulated on kinds" python3 -c "
import json; d=json.load(open('$work/l2d.json')); g=d['rows']
for v in ('decode_split_l2_sim','decode_paged_l2_sim'):
    assert g[2]['bytes'][v]==g[0]['bytes'][v]+g[1]['bytes'][v]
    assert abs(g[2]['prediction'][v]['seconds']-g[0]['prediction'][v]['seconds']-g[1]['prediction'][v]['seconds'])<1e-12"
"$bin" model --model-config gemma-3-27b --seq 4M --device h200 --l2-order head-major --variants floor,flash_l2_sim --format csv >"$work/l2o.csv" 2>"$work/err"
check "a kind over the budget: noted" grep -q "note: L2 simulation left out for 1 shape(s)" "$work/err"
check "a kind over the budget: its total noted" grep -q "gemma-3-27b's total .* has no simulated bytes: its full layers were left out" "$work/err"
check "a kind over the budget: the other simulated" python3 -c "
import csv; r=list(csv.DictReader(open('$work/l2o.csv'))); assert r[0]['bytes_flash_l2_sim'] and not r[1]['bytes_flash_l2_sim'] and not r[2]['bytes_flash_l2_sim']"
# The README's serving table is this binary's output (the command of its generated: comment).
root=$(cd "$(dirname "$0")/.." && pwd)
"$bin" model --model-config llama-3.1-8b,gemma-3-27b,deepseek-v3 --decode --batch 32 --seq-kv 32K --device h200 \
  --variants decode_split --columns bytes,time --format md >"$work/serve.md" 2>/dev/null
check "README serving table is current" python3 -c "
import sys
readme = open('$root/README.md', encoding='utf-8').read().split('\n')
got = [l for l in open('$work/serve.md', encoding='utf-8').read().split('\n') if l.startswith(('|', '**'))]
at = readme.index(got[0])
exp = [l for l in readme[at:at + len(got) + 1] if l]
assert exp == got, (exp, got)"
"$bin" model --help >"$work/help"
check "model --help explains whole models" grep -q "With --model-config (whole models" "$work/help"

echo "model_config_cli: $pass passed, $fails failed"
test "$fails" -eq 0
