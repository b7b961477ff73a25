#!/usr/bin/env bash
# The `cluster` test (issue 21): `hbmscope submit` on a real Slurm. Starts a
# one-node cluster of its own in a temporary folder (munged with its own key and
# socket, slurmctld and slurmd on free ports, no systemd), submits a sweep as an
# array of 4 plus the merge and checks the merged report against the same sweep
# run in one process; then a task made to fail and one cancelled while it runs,
# the merge's message, the re-run it prints and the merge again; then a
# measuring sweep, whose tasks get the node's one GPU (as Slurm counts it) in turn. Skipped (77)
# with the reason where Slurm, munge or root is missing. Everything it started
# is stopped on every way out (scancel, scontrol shutdown, the munged pid, then
# any process left that carries this run's mark), within a hard time limit.
set -u
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
limit=${HBMSCOPE_CLUSTER_LIMIT:-150}  # seconds, all of it; CTest's TIMEOUT is above it
skip() { echo "cluster test skipped: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "not root (slurmd and munged of its own run as root)"
for p in slurmctld slurmd sbatch squeue scontrol scancel sinfo munged python3; do
  command -v "$p" >/dev/null 2>&1 || skip "$p is not installed (scripts/install-deps.sh installs slurmctld, slurmd, slurm-client and munge)"
done

T=$(mktemp -d /tmp/hbmscope-cluster.XXXXXX)
chmod 0755 "$T"  # munged refuses a socket folder that others cannot reach (mktemp makes 0700)
mark="HBMSCOPE_CLUSTER_TEST=$T"  # in the environment of every process this test starts
fails=0
pass=0
t0=$SECONDS
check() {  # check NAME CONDITION...
  local name=$1; shift
  if "$@"; then pass=$((pass + 1)); else echo "FAIL: $name"; fails=$((fails + 1)); fi
}
say() { echo "[$((SECONDS - t0))s] $*"; }
# A Slurm client call, never longer than 20 s.
sl() { timeout 20 env "$mark" "$@"; }

# Stopping everything this run started, as a script of its own: the test runs
# it on every way out, and so does a guardian outside the test's process group
# should the test itself be killed (CTest's timeout) or crash.
cat >"$T/stop.sh" <<EOF
#!/usr/bin/env bash
T='$T' mark='$mark'
export SLURM_CONF="\$T/slurm.conf"
if [ -s "\$T/slurmctld.pid" ]; then
  jobs=\$(timeout 10 squeue -h -o %A 2>/dev/null | sort -u)
  [ -n "\$jobs" ] && timeout 10 scancel \$jobs 2>/dev/null
  timeout 10 scontrol shutdown >/dev/null 2>&1
fi
for f in slurmctld.pid slurmd.pid munge/munged.pid; do
  [ -s "\$T/\$f" ] || continue
  p=\$(cat "\$T/\$f")
  kill "\$p" 2>/dev/null
  for i in \$(seq 50); do kill -0 "\$p" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "\$p" 2>/dev/null
done
# Whatever is left of this run (a slurmstepd, a job's process), by its mark.
left=
for e in /proc/[0-9]*/environ; do
  p=\${e#/proc/}; p=\${p%/environ}
  { tr '\0' '\n' <"\$e" | grep -qxF "\$mark"; } 2>/dev/null && left="\$left \$p"
done
[ -n "\$left" ] && { echo "cluster test: stopping what was left:\$left"; kill -KILL \$left 2>/dev/null; }
[ "\${HBMSCOPE_CLUSTER_KEEP:-0}" = 1 ] && echo "kept \$T" || rm -rf "\$T"
EOF
stop_all() {
  trap - EXIT INT TERM HUP
  kill "${watchdog:-}" "${guardian:-}" 2>/dev/null  # their sleeps end with them (their traps)
  if [ "${HBMSCOPE_CLUSTER_KEEP:-0}" = 1 ] || [ "$fails" -ne 0 ]; then
    for f in "$T"/log/*.log; do echo "---- $f (last lines)"; tail -n 15 "$f"; done
  fi
  bash "$T/stop.sh"
}
trap 'stop_all' EXIT
trap 'echo "cluster test: interrupted or over ${limit}s: stopping"; fails=$((fails + 1)); exit 1' INT TERM HUP
# The watchdog ends the test after $limit seconds; the guardian, in a session
# of its own, stops everything should the test end without doing so.
main=$$
(
  trap 'kill $s 2>/dev/null; exit 0' TERM
  sleep "$limit" & s=$!
  wait $s && kill -TERM $main
) &
watchdog=$!
setsid bash -c 'trap "kill \$s 2>/dev/null; exit 0" TERM
  while kill -0 '"$main"' 2>/dev/null; do sleep 1 & s=$!; wait $s; done
  [ -e '"$T/stop.sh"' ] && bash '"$T/stop.sh"' >/dev/null 2>&1' </dev/null >/dev/null 2>&1 &
guardian=$!
nap() { sleep "$1"; }

# ---- A one-node cluster of its own.
mkdir -m 0755 "$T/munge" "$T/state" "$T/spool" "$T/log" "$T/work"
if command -v mungekey >/dev/null 2>&1; then
  mungekey --create --keyfile="$T/munge/munge.key" >/dev/null 2>&1
else
  head -c 1024 /dev/urandom >"$T/munge/munge.key"
fi
chmod 0400 "$T/munge/munge.key"
env "$mark" munged --socket="$T/munge/munge.socket" --key-file="$T/munge/munge.key" --pid-file="$T/munge/munged.pid" \
  --seed-file="$T/munge/munged.seed" --log-file="$T/log/munged.log" --force ||
  { fails=1; echo "FAIL: munged did not start"; exit 1; }
read -r port_ctld port_slurmd < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
node=$(slurmd -C | head -n 1)
name=$(hostname -s)
cat >"$T/slurm.conf" <<EOF
ClusterName=hbmscopetest
SlurmctldHost=$name(127.0.0.1)
SlurmctldPort=$port_ctld
SlurmdPort=$port_slurmd
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SchedulerParameters=batch_sched_delay=0
MinJobAge=5
KillWait=2
ReturnToService=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
$node NodeAddr=127.0.0.1 Gres=gpu:1 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
# One GPU as Slurm counts it (its "device" /dev/null: there may be no GPU here;
# without a File slurmd counts none), so that `--measure`'s --gres=gpu:1 is
# scheduled as on a GPU node.
cat >"$T/gres.conf" <<EOF
AutoDetect=off
Name=gpu File=/dev/null
EOF
export SLURM_CONF="$T/slurm.conf"
env "$mark" slurmctld -D -i -f "$SLURM_CONF" >"$T/log/slurmctld.out" 2>&1 &
env "$mark" slurmd -D -f "$SLURM_CONF" >"$T/log/slurmd.out" 2>&1 &
state=
for i in $(seq 100); do
  state=$(timeout 5 sinfo -h -o %T 2>/dev/null)
  [ "$state" = idle ] && break
  nap 0.2
done
[ "$state" = idle ] || { fails=1; echo "FAIL: the node is '$state', not idle"; exit 1; }
say "cluster up: node idle, ports $port_ctld and $port_slurmd"

# Waits until the queue is empty (every job ended), at most $1 seconds.
wait_queue() {
  local until=$((SECONDS + $1)) q
  while [ $SECONDS -lt $until ]; do
    q=$(timeout 5 squeue -h -o %A 2>/dev/null)
    [ -z "$q" ] && return 0
    nap 0.2
  done
  echo "queue not empty after $1 s: $q"; return 1
}
# Job ids from submit's output: array, merge, fault merge.
job_ids() { sed -n 's/^  \(array\|merge\) job \([0-9]*\):.*/\2/p' "$1" | tr '\n' ' '; }

cd "$T/work" || exit 1
sweep=(--seq 1K:16K:x2 --head-dim 64,128 --causal --heads 8 --kv-heads 2 --device h100)
"$bin" sweep "${sweep[@]}" --format json --output full.json 2>/dev/null
check "the sweep in one process" test -s full.json

# ---- An array of 4 and the merge.
sl "$bin" submit --tasks 4 --dir "$T/work/out" --partition test --time 5 -- "${sweep[@]}" --output all.json >sub1 2>&1
check "submit exits 0" test $? -eq 0
read -r array merge fault <<<"$(job_ids sub1)"
check "submit printed 3 job ids" test -n "${fault:-}"
say "submitted: array $array, merge $merge, fault merge $fault"
wait_queue 60
check "jobs ended" test $? -eq 0
say "jobs ended"
# sbatch --wait can exit 0 for a job that never ran: the files say what ran.
for i in 1 2 3 4; do check "shard $i written" test -s "out/shard-$i.json"; done
for i in 1 2 3 4; do check "task $i's log" test -e "out/logs/task-${array}_$i.out"; done
check "the merged report" test -s all.json
check "the merged report = the sweep in one process, byte for byte" cmp -s all.json full.json
check "the merge's log" test -e "out/logs/merge-$merge.out"
check "the fault merge never ran" test ! -e "out/logs/merge-$fault.out"

# ---- A task that fails and one cancelled while it runs: no shard, the merge's message.
rm -f all.json
cat >"$T/flaky" <<EOF
#!/usr/bin/env bash
if [ -e "$T/fail" ]; then
  case " \$* " in
    *" --shard 3/4 "*) echo "made to fail" >&2; exit 1 ;;
    *" --shard 2/4 "*) touch "$T/running-2"; exec sleep 100 ;;
  esac
fi
exec "$bin" "\$@"
EOF
chmod +x "$T/flaky"
touch "$T/fail"
sl "$bin" submit --tasks 4 --dir "$T/work/out" --program "$T/flaky" --partition test -- "${sweep[@]}" --output all.json >sub2 2>&1
check "submit again (the same sweep) exits 0" test $? -eq 0
read -r array merge fault <<<"$(job_ids sub2)"
for i in $(seq 100); do [ -e "$T/running-2" ] && break; nap 0.2; done
check "task 2 is running" test -e "$T/running-2"
sl scancel "${array}_2"
wait_queue 60
check "jobs ended" test $? -eq 0
say "failed run ended"
check "the failed task left no shard" test ! -e out/shard-3.json
check "the cancelled task left no shard" test ! -e out/shard-2.json
check "the others wrote theirs" test -s out/shard-1.json -a -s out/shard-4.json
check "no temporary files" test -z "$(ls -A out | grep -v -e '^shard-[14].json$' -e '^logs$' -e '^manifest.json$' -e '\.sbatch$')"
check "no report" test ! -e all.json
check "the merge after success never ran" test ! -e "out/logs/merge-$merge.out"
log=out/logs/merge-$fault.out
check "the fault merge ran" test -e "$log"
check "its log is one line" test "$(wc -l <"$log" 2>/dev/null)" = 1
check "it names the missing shards and the re-run" grep -qF "hbmscope: error: merge: 2 of 4 shards missing in $T/work/out (2-3): their tasks failed, were killed or have not run (logs in $T/work/out/logs); re-run just them, then the merge: j=\$(sbatch --parsable --array=2-3 $T/work/out/tasks.sbatch) && sbatch --dependency=afterok:\${j%%;*} --kill-on-invalid-dep=yes $T/work/out/merge.sbatch" "$log"

# ---- The re-run the message prints, then the merge: the same report.
rm -f "$T/fail"
rerun=$(sed -n 's/.*re-run just them, then the merge: //p' "$log")
sl bash -c "$rerun" >rerun.out 2>&1
check "the re-run line submits" test $? -eq 0
wait_queue 60
check "jobs ended" test $? -eq 0
say "re-run ended"
check "shards 2 and 3 now written" test -s out/shard-2.json -a -s out/shard-3.json
check "after the re-run, the merge = the sweep in one process" cmp -s all.json full.json

# ---- --measure: each task is given the GPU, one task at a time (the node has one).
cat >"$T/gpu-task" <<EOF
#!/usr/bin/env bash
# What a measuring task is given; then the sweep without --measure (no GPU here).
echo "\$(date +%s.%N) gpus=\${SLURM_JOB_GPUS:-}" >"$T/gpu-\$SLURM_ARRAY_TASK_ID.log"
sleep 1
args=()
for a in "\$@"; do [ "\$a" = --measure ] || args+=("\$a"); done
"$bin" "\${args[@]}"
rc=\$?
echo "\$(date +%s.%N)" >>"$T/gpu-\$SLURM_ARRAY_TASK_ID.log"
exit \$rc
EOF
chmod +x "$T/gpu-task"
measured=(--seq 1K:8K:x2 --head-dim 64,128 --measure)
sl "$bin" submit --tasks 2 --dir "$T/work/gpu" --program "$T/gpu-task" --partition test -- "${measured[@]}" \
  --output gpu.json >sub3 2>&1
check "submit --measure exits 0" test $? -eq 0
check "its tasks ask for a GPU each" grep -qx "#SBATCH --gres=gpu:1" gpu/tasks.sbatch
wait_queue 60
check "jobs ended" test $? -eq 0
say "measuring run ended"
check "task 1 was given a GPU" grep -q "gpus=0" "$T/gpu-1.log"
check "task 2 was given a GPU" grep -q "gpus=0" "$T/gpu-2.log"
python3 - "$T/gpu-1.log" "$T/gpu-2.log" <<'EOF'
import sys
(a0, a1), (b0, b1) = [[float(l.split()[0]) for l in open(f)] for f in sys.argv[1:]]
assert a1 <= b0 or b1 <= a0, f"the two tasks shared the GPU: {a0}-{a1} and {b0}-{b1}"
EOF
check "one task at a time on the one GPU" test $? -eq 0
"$bin" sweep --seq 1K:8K:x2 --head-dim 64,128 --format json --output gpu-full.json 2>/dev/null
check "their merged report" cmp -s gpu.json gpu-full.json

say "$pass passed, $fails failed"
test "$fails" -eq 0
