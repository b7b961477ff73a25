#!/usr/bin/env bash
# `hbmscope submit`, `merge --from` and `sweep --shard auto` as a user meets
# them, without a cluster: a stand-in sbatch on the PATH runs each script at
# once (array tasks one by one, with SLURM_ARRAY_TASK_ID) and honours afterok /
# afternotok, so the whole path from submit to the merged report, a task that
# fails, the merge's message and the re-run it prints are exercised here. The
# same on a real Slurm: tests/cluster_test.sh.
source "$(dirname "$0")/lib.sh"
run_out=$work/_out run_err=$work/_err  # $work/out is the shards' folder

# The stand-in sbatch. State (job ids, outcomes, every call) in $FAKE_SLURM.
mkdir -p "$work/bin" "$work/slurm"
cat >"$work/bin/sbatch" <<'EOF'
#!/usr/bin/env bash
state=${FAKE_SLURM:?}
echo "$*" >>"$state/calls"
if [ "${1:-}" = --version ]; then echo "slurm 22.05.8"; exit 0; fi
if [ -e "$state/refuse" ] || { [ -e "$state/refuse-merge" ] && [[ "$*" == *--dependency* ]]; }; then
  echo "sbatch: error: Batch job submission failed: Invalid account" >&2; exit 1
fi
array= dep= script=
for a; do
  case $a in
    --parsable | --kill-on-invalid-dep=yes) ;;
    --array=*) array=${a#--array=} ;;
    --dependency=*) dep=${a#--dependency=} ;;
    -*) echo "stand-in sbatch: unexpected $a" >&2; exit 9 ;;
    *) script=$a ;;
  esac
done
id=$(($(cat "$state/next" 2>/dev/null || echo 100) + 1))
echo "$id" >"$state/next"
echo "$id"
[ -n "$array" ] || array=$(sed -n 's/^#SBATCH --array=//p' "$script")
if [ -n "$dep" ]; then
  outcome=$(cat "$state/job-${dep#*:}")
  case ${dep%%:*} in
    afterok) [ "$outcome" = ok ] || { echo cancelled >"$state/job-$id"; exit 0; } ;;
    afternotok) [ "$outcome" = failed ] || { echo cancelled >"$state/job-$id"; exit 0; } ;;
  esac
fi
dir=$(sed -n 's/^#SBATCH --chdir=//p' "$script")
outcome=ok
if [ -n "$array" ]; then
  for part in ${array//,/ }; do
    for i in $(seq "${part%-*}" "${part#*-}"); do
      (cd "$dir" && SLURM_ARRAY_TASK_ID=$i bash "$script") >"$dir/logs/task-${id}_$i.out" 2>&1 || outcome=failed
    done
  done
else
  (cd "$dir" && bash "$script") >"$dir/logs/merge-$id.out" 2>&1 || outcome=failed
fi
echo "$outcome" >"$state/job-$id"
EOF
chmod +x "$work/bin/sbatch"
export PATH="$work/bin:$PATH" FAKE_SLURM="$work/slurm"
# A task made to fail: the hbmscope the jobs run fails shard 2 while $work/fail exists.
cat >"$work/bin/flaky-hbmscope" <<EOF
#!/usr/bin/env bash
if [ -e '$work/fail' ] && [[ " \$* " == *" --shard 2/3 "* ]]; then echo "made to fail" >&2; exit 1; fi
exec '$bin' "\$@"
EOF
chmod +x "$work/bin/flaky-hbmscope"
cd "$work" || exit 1
sweep=(--seq 1K:8K:x2 --head-dim 64,128 --causal --device h100)

# ---- Help that teaches.
"$bin" submit --help >"$work/help"
check "submit --help exits 0" test $? -eq 0
check "submit --help: afterok and afternotok" grep -q "afterok.*" "$work/help"
check "submit --help: examples" grep -q "^Examples:" "$work/help"
check "submit --help: the re-run line" grep -q "sbatch --parsable --array=2,5" "$work/help"
"$bin" --help | grep -q "submit" ; check "hbmscope --help lists submit" test $? -eq 0
"$bin" sweep --help | grep -q "I/N|auto"; check "sweep --help: --shard auto" test $? -eq 0
"$bin" merge --help | grep -q "\-\-from DIR"; check "merge --help: --from" test $? -eq 0

# ---- --dry-run: the scripts, nothing written or submitted.
"$bin" submit --tasks 3 --dir out --partition gpu --time 30:00 --sbatch mem=2G --dry-run -- "${sweep[@]}" \
  --output all.json --plot all.svg >"$work/dry" 2>"$work/_err"
check "dry-run exits 0" test $? -eq 0
check "dry-run: stderr empty" test ! -s "$work/_err"
check "dry-run: nothing written" test ! -e "$work/_out"
check "dry-run: nothing submitted" test ! -e "$work/slurm/calls"
check "dry-run: the array" grep -qx "#SBATCH --array=1-3" "$work/dry"
check "dry-run: partition, time, extra line" grep -qx "#SBATCH --partition=gpu" "$work/dry"
check "dry-run: time" grep -qx "#SBATCH --time=30:00" "$work/dry"
check "dry-run: mem on both scripts" test "$(grep -cx '#SBATCH --mem=2G' "$work/dry")" -eq 2
check "dry-run: no GPU without --measure" test "$(grep -c 'gres' "$work/dry")" -eq 0
check "dry-run: the task's sweep, word for word" grep -qxF "exec $bin sweep --seq 1K:8K:x2 --head-dim 64,128 --causal --device h100 --shard \"\$i/3\" --format json --output $work/out/\"shard-\$i.json\"" "$work/dry"
check "dry-run: the merge takes the report options" grep -qxF "exec $bin merge --from $work/out --output all.json --plot all.svg --format json" "$work/dry"
check "dry-run: the sbatch lines" grep -q "^# sbatch --parsable --dependency=afternotok:\$ARRAY --kill-on-invalid-dep=yes $work/out/merge.sbatch" "$work/dry"
"$bin" submit --tasks 2 --dir m --gpu-type h100 --dry-run -- --seq 1K,2K --head-dim 64 --measure --kernels flash >"$work/drym"
check "dry-run --measure: a GPU of its own per task" grep -qx "#SBATCH --gres=gpu:h100:1" "$work/drym"
check "dry-run --measure: one gres line" test "$(grep -c 'gres' "$work/drym")" -eq 1
check "dry-run: without --output, the report in the folder" grep -qF -- "--format table --output $work/m/report.txt" "$work/drym"

# ---- Submitted: every task succeeds, the merge gives the unsharded sweep's report.
"$bin" sweep "${sweep[@]}" --format json --output "$work/full.json" 2>/dev/null
"$bin" submit --tasks 3 --dir out -- "${sweep[@]}" --output all.json >"$work/sub" 2>"$work/_err"
check "submit exits 0" test $? -eq 0
check "submit prints the array job" grep -q "array job 101: task I writes shard-I.json" "$work/sub"
check "submit prints the merge job" grep -q "merge job 102: after all 3 succeed, writes all.json" "$work/sub"
check "submit prints the fault merge job" grep -q "merge job 103: only if a task fails" "$work/sub"
check "submit: sbatch --parsable for the array" grep -qx -- "--parsable $work/out/tasks.sbatch" "$work/slurm/calls"
check "submit: the merge after all succeed" grep -qx -- "--parsable --dependency=afterok:101 --kill-on-invalid-dep=yes $work/out/merge.sbatch" "$work/slurm/calls"
check "submit: the fault merge" grep -qx -- "--parsable --dependency=afternotok:101 --kill-on-invalid-dep=yes $work/out/merge.sbatch" "$work/slurm/calls"
check "the merged report = the sweep in one process, byte for byte" cmp -s all.json full.json
check "the folder: manifest, scripts, 3 shards, logs" test -s out/manifest.json -a -s out/tasks.sbatch -a -s out/merge.sbatch -a -s out/shard-3.json -a -d out/logs
check "the fault merge did not run" grep -qx cancelled "$work/slurm/job-103"
python3 -c "import json; m=json.load(open('out/manifest.json')); assert m['schema']=='hbmscope.submit/1' and m['tasks']==3 and m['total_rows']==8 and m['sweep']==['--seq','1K:8K:x2','--head-dim','64,128','--causal','--device','h100'], m"
check "the manifest records the sweep" test $? -eq 0

# ---- A task fails: no partial shard, the fault merge names it, its re-run line repairs it.
rm -f all.json
touch "$work/fail"
"$bin" submit --tasks 3 --dir out --program "$work/bin/flaky-hbmscope" -- "${sweep[@]}" --output all.json >"$work/sub" 2>&1
check "same sweep again, other program: accepted" test $? -eq 0
check "the failed task left no shard" test ! -e out/shard-2.json
check "nor a temporary file" test -z "$(ls -A out | grep -v -e '^shard-[13].json$' -e '^logs$' -e '^manifest.json$' -e '\.sbatch$')"
check "the merge was cancelled" grep -qx cancelled "$work/slurm/job-105"
log=out/logs/merge-106.out
check "the fault merge ran and failed" grep -qx failed "$work/slurm/job-106"
check "its log is one line" test "$(wc -l <"$log")" -eq 1
check "it names the missing shard and the re-run" grep -qxF "hbmscope: error: merge: 1 of 3 shards missing in $work/out (2): their tasks failed, were killed or have not run (logs in $work/out/logs); re-run just them, then the merge: j=\$(sbatch --parsable --array=2 $work/out/tasks.sbatch) && sbatch --dependency=afterok:\${j%%;*} --kill-on-invalid-dep=yes $work/out/merge.sbatch" "$log"
check "no report from a failed merge" test ! -e all.json
rm -f "$work/fail"
rerun=$(sed -n 's/.*re-run just them, then the merge: //p' "$log")
bash -c "$rerun" >/dev/null
check "the re-run line runs" test $? -eq 0
check "after the re-run, the merge = the sweep in one process" cmp -s all.json full.json
rm -f out/shard-1.json out/shard-3.json
expect_exit "merge --from with shards missing" 1 "merge: 2 of 3 shards missing in $work/out (1, 3)" merge --from out --output x.json
check "... and no report written" test ! -e x.json

# ---- The folder: another sweep is refused, the same sweep starts over.
expect_exit "another sweep in the folder" 1 "--dir: $work/out holds the shards of another sweep ($work/out/manifest.json: 3 tasks of 8 rows of \`sweep --seq 1K:8K:x2" \
  submit --tasks 3 --dir out -- --seq 1K:8K:x2 --head-dim 64,128 --output all.json
expect_exit "same sweep, other N: another sweep" 1 "holds the shards of another sweep" submit --tasks 2 --dir out -- "${sweep[@]}" --output all.json
mkdir -p busy && touch busy/notes.txt
expect_exit "a folder of other files" 1 "--dir: $work/busy is not empty and holds no manifest.json" submit --tasks 2 --dir busy -- "${sweep[@]}"
touch plainfile
expect_exit "a file as the folder" 1 "exists and is not a folder" submit --tasks 2 --dir plainfile -- "${sweep[@]}"
"$bin" submit --tasks 3 --dir out -- "${sweep[@]}" --output all.json >/dev/null 2>&1
check "the same sweep again: accepted, shards made anew" test -s out/shard-1.json -a -s out/shard-3.json

# ---- Report options go to the merge: table, units, wide, chart; no --output: DIR/report.EXT.
"$bin" sweep "${sweep[@]}" --units binary --wide --output full.md 2>/dev/null
"$bin" submit --tasks 4 --dir outmd -- "${sweep[@]}" --units binary --wide --output all.md >/dev/null
check "Markdown, binary units, wide: as the sweep's" cmp -s all.md full.md
"$bin" sweep "${sweep[@]}" >full.txt 2>/dev/null
"$bin" submit --tasks 2 --dir outtxt -- "${sweep[@]}" >/dev/null
check "no --output: the table in DIR/report.txt" cmp -s outtxt/report.txt full.txt
if command -v gnuplot >/dev/null 2>&1; then
  "$bin" submit --tasks 2 --dir outplot -- "${sweep[@]}" --format csv --output all.csv --plot all.svg >/dev/null
  check "the chart, from the merge" grep -q "<svg" all.svg
  "$bin" sweep "${sweep[@]}" --format csv >full.csv 2>/dev/null
  check "CSV as the sweep's" cmp -s all.csv full.csv
fi

# ---- Whole models: a point is a row per kind of layer and a total; shards cut between points.
models=(--model-config llama-3.1-8b,gemma-3-27b --seq 1K:8K:x2 --device h100)
"$bin" sweep "${models[@]}" --format json --output models-full.json 2>/dev/null
"$bin" submit --tasks 3 --dir outmodels -- "${models[@]}" --output models.json >/dev/null 2>"$work/_err"
check "whole models: submit exits 0" test $? -eq 0
check "whole models: the merge = the sweep in one process" cmp -s models.json models-full.json
python3 -c "import json; m=json.load(open('outmodels/manifest.json')); r=json.load(open('models-full.json'))['rows']; assert m['total_rows']==len(r)>8, (m, len(r))"
check "whole models: the manifest counts report rows" test $? -eq 0

# ---- Shell injection through paths, options and labels: impossible.
evil="$work/it's \$(touch pwned1) dir"
mkdir -p "$evil"
cat >"$evil/c\`touch pwned2\`'; touch pwned3; '.json" <<'JSON'
{"axes": {"seq": "1K:4K:x2", "head_dim": 64},
 "groups": [{"label": "$(touch pwned4)"}, {"label": "it's `touch pwned5`; \"x\"", "heads": 2}]}
JSON
(cd "$evil" && "$bin" submit --tasks 2 --dir "$work/inj" -- --config "c\`touch pwned2\`'; touch pwned3; '.json" \
  --output "r'\$(touch pwned6).json" >/dev/null 2>&1)
(cd "$evil" && "$bin" sweep --config "c\`touch pwned2\`'; touch pwned3; '.json" --output full-inj.json 2>/dev/null)
check "quoted folder, config and output reach the jobs" test -s "$evil/r'\$(touch pwned6).json"
check "labels with quotes come through" cmp -s "$evil/r'\$(touch pwned6).json" "$evil/full-inj.json"
check "nothing ran: no pwned files" test -z "$(find "$work" -name 'pwned*')"
expect_exit "--dir with a quote" 2 "holds a character that a #SBATCH line cannot carry" submit --tasks 2 --dir "a'b" -- --seq 4K
expect_exit "--sbatch with a newline" 2 "holds a control character" submit --tasks 2 --dir x --sbatch $'mem=1G\ntouch pwned' -- --seq 4K

# ---- Refusals: the command line (exit 2) and values (exit 1).
expect_exit "no sweep" 2 "submit: no sweep given: put the sweep's options after --" submit --tasks 2 --dir x
expect_exit "sweep options without --" 2 "(see --help)" submit --tasks 2 --dir x --seq 4K
expect_exit "no --tasks" 2 "--tasks is required" submit --dir x -- --seq 4K
expect_exit "--tasks 0" 2 "--tasks" submit --tasks 0 --dir x -- --seq 4K
expect_exit "--tasks abc" 2 "--tasks" submit --tasks abc --dir x -- --seq 4K
expect_exit "unknown submit option" 2 "--partitionn" submit --tasks 2 --dir x --partitionn gpu -- --seq 4K
expect_exit "unknown sweep option" 2 "submit: the sweep after --: The following argument was not expected: --bogus" submit --tasks 2 --dir x -- --seq 4K --bogus
expect_exit "the sweep's --help" 2 "--help after -- is the sweep's" submit --tasks 2 --dir x -- --help
expect_exit "--shard in the sweep" 2 "submit: --shard: submit gives each task its shard" submit --tasks 2 --dir x -- --seq 4K,8K --shard 1/2
expect_exit "--device-index with --measure" 2 "leave --device-index out" submit --tasks 2 --dir x -- --seq 4K,8K --measure --device-index 1
expect_exit "--plot -" 2 "the merge job has no terminal" submit --tasks 2 --dir x -- --seq 4K,8K --plot -
expect_exit "bad --time" 2 "--time: '1h' is not a Slurm time limit" submit --tasks 2 --dir x --time 1h -- --seq 4K,8K
expect_exit "bad --partition" 2 "--partition: 'a b' is not a Slurm name" submit --tasks 2 --dir x --partition 'a b' -- --seq 4K,8K
expect_exit "--sbatch owned option" 2 "--sbatch: '--array=1-9' is set by submit" submit --tasks 2 --dir x --sbatch=--array=1-9 -- --seq 4K,8K
expect_exit "--gpu-type without --measure" 2 "--gpu-type: needs --measure" submit --tasks 2 --dir x --gpu-type h100 -- --seq 4K,8K
expect_exit "a bad sweep value" 2 "--seq" submit --tasks 2 --dir x -- --seq 4Q
expect_exit "more tasks than shapes" 1 "--tasks: 9 tasks for a sweep of 8 shapes would leave some without a shape; give --tasks 8 or fewer" submit --tasks 9 --dir x -- "${sweep[@]}"
expect_exit "--program not runnable" 1 "--program: '$work/none' is not a program" submit --tasks 2 --dir x --program none -- --seq 4K,8K
check "refusals wrote nothing" test ! -e "$work/x"
mkdir -p "$work/empty"
PATH="$work/empty" "$bin" submit --tasks 2 --dir x -- --seq 4K,8K >"$work/_out" 2>"$work/_err"
check "no sbatch on the PATH: exit 1" test $? -eq 1
check "no sbatch on the PATH: one line" grep -qxF "hbmscope: error: sbatch is not on the PATH (run submit on a Slurm login node; --dry-run prints the scripts without it)" "$work/_err"
check "... and nothing written" test ! -e "$work/x"
touch "$work/slurm/refuse"
expect_exit "sbatch refuses" 1 "sbatch did not submit the array job of $work/y/tasks.sbatch: sbatch: error: Batch job submission failed: Invalid account" submit --tasks 2 --dir y -- --seq 4K,8K
rm -f "$work/slurm/refuse"
touch "$work/slurm/refuse-merge"
expect_exit "sbatch refuses the merge" 1 "sbatch did not submit the merge job: sbatch: error: Batch job submission failed: Invalid account; array job" submit --tasks 2 --dir z -- --seq 4K,8K
check "... naming the queued array and the merge's sbatch line" grep -qE "array job [0-9]+ is queued: cancel with scancel [0-9]+, or submit the merge by hand: sbatch --dependency=afterok:[0-9]+ $work/z/merge.sbatch\$" "$work/_err"
rm -f "$work/slurm/refuse-merge"

# ---- merge's own refusals.
expect_exit "merge with nothing" 2 "merge: no reports given: FILE... or --from DIR" merge
expect_exit "merge files and --from" 2 "not both" merge full.json --from out
expect_exit "merge --from a folder without manifest" 1 "cannot read" merge --from busy
expect_exit "merge --x without --plot" 2 "--x: needs --plot" merge full.json --x head_dim
expect_exit "merge --units bad" 2 "--units: 'kb' is not one of" merge full.json --format table --units kb

"$bin" sweep "${sweep[@]}" --shard 1/2 --format json --output g1.json 2>/dev/null
"$bin" sweep "${sweep[@]}" --shard 2/2 --format json --output g2.json 2>/dev/null
python3 - <<'EOF'
import json
for f, gpu in (("g1.json", "NVIDIA H100 80GB HBM3"), ("g2.json", "NVIDIA A100-SXM4-80GB")):
    r = json.load(open(f)); r["device"] = {"name": gpu, "sm_count": 132}; json.dump(r, open(f, "w"))
EOF
expect_exit "merge: shards measured on two kinds of GPU" 1 "merge: g2.json was measured on NVIDIA A100-SXM4-80GB, g1.json on NVIDIA H100 80GB HBM3: refusing to mix them (submit --gpu-type TYPE keeps every task on one kind)" merge g1.json g2.json
sed -i 's/A100-SXM4-80GB/H100 80GB HBM3/' g2.json
"$bin" merge g1.json g2.json --format table >/dev/null 2>&1
check "merge: shards measured on one kind of GPU" test $? -eq 0

# ---- --shard auto: from the array's environment.
"$bin" sweep "${sweep[@]}" --shard 3/4 --format json >s34.json
SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=3 SLURM_ARRAY_TASK_STEP=1 SLURM_ARRAY_TASK_COUNT=4 \
  "$bin" sweep "${sweep[@]}" --shard auto --format json >auto.json
check "--shard auto in task 2 of 0-3 = --shard 3/4" cmp -s auto.json s34.json
SLURM_ARRAY_TASK_ID=8 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=12 SLURM_ARRAY_TASK_STEP=4 SLURM_ARRAY_TASK_COUNT=4 \
  "$bin" sweep "${sweep[@]}" --shard auto --format json >auto.json
check "--shard auto in task 8 of 0-12:4 = --shard 3/4" cmp -s auto.json s34.json
env -u SLURM_ARRAY_TASK_ID "$bin" sweep --shard auto >"$work/_out" 2>"$work/_err"
check "--shard auto outside an array: exit 1" test $? -eq 1
check "--shard auto outside an array: one line" grep -qxF "hbmscope: error: --shard auto: not in a Slurm array job (SLURM_ARRAY_TASK_ID is not set); give --shard I/N, or submit the sweep with \`hbmscope submit\`" "$work/_err"
SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_MAX=7 SLURM_ARRAY_TASK_STEP=1 SLURM_ARRAY_TASK_COUNT=3 \
  expect_exit "--shard auto in a list array" 1 "the array's indices are not one range" sweep --shard auto
expect_exit "--shard autox" 2 "--shard: 'autox' is not I/N" sweep --shard autox

finish
