#!/usr/bin/env bash
# Runs a sweep as a job array on a real one-node Slurm started here (munge, slurmctld and
# slurmd with a private configuration, key, socket and ports), merges the shards and checks
# the rows equal the unsharded sweep. Needs root and Debian's slurm-wlm and munge; when
# Slurm cannot start the test fails. The daemons are stopped and the files removed on exit.
#
#   slurm_array_test.sh STEPSIM_BINARY SOURCE_DIR
set -euo pipefail

stepsim=$1
source_dir=$2
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
[ "$(id -u)" -eq 0 ] || fail "the test starts slurmctld and slurmd and must run as root"
for program in munged slurmctld slurmd sbatch sinfo; do
  command -v "$program" >/dev/null || fail "$program is missing (tools/setup-debian.sh installs slurm-wlm and munge)"
done

work=$(mktemp -d /tmp/stepsim-slurm.XXXXXX)
chmod 755 "$work"
stop() {
  local pidfile pid
  for pidfile in "$work/slurmd.pid" "$work/slurmctld.pid" "$work/munged.pid"; do
    [ -s "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap stop EXIT
logs() {
  for f in "$work"/*.log; do echo "== $f"; tail -20 "$f"; done >&2
}

# munge with its own key and socket, so that a system munge (if any) is left alone.
dd if=/dev/urandom of="$work/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/munge.key"
munged --force --key-file="$work/munge.key" --socket="$work/munge.socket" --pid-file="$work/munged.pid" \
  --log-file="$work/munged.log" --seed-file="$work/munged.seed" || fail "munged did not start"

host=$(hostname)
# Ports away from Slurm's defaults (6817/6818) so that a system Slurm is not disturbed.
port=$((20000 + $$ % 20000))
mkdir -p "$work/state" "$work/spool"
cat >"$work/slurm.conf" <<CONF
ClusterName=stepsimtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/munge.socket
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=1000 State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$work/slurm.conf
slurmctld -c -f "$SLURM_CONF" || { logs; fail "slurmctld did not start"; }
slurmd -f "$SLURM_CONF" || { logs; fail "slurmd did not start"; }
for _ in $(seq 150); do
  state=$(sinfo -h -n "$host" -o %T 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.2
done
[ "$state" = idle ] || { logs; fail "the node did not become idle (state '$state')"; }

# The sweep: 4 bucket sizes x 3 TP degrees on 64 GPUs, one invalid degree among them.
sweep=(--vary data_parallel.bucket_cap_mb=5,25,100,200 --vary parallel.tp=2,3,8 --set model=llama3-8b --gpus 64)
"$stepsim" sweep "${sweep[@]}" -o "$work/whole.csv" 2>/dev/null
cd "$work"
STEPSIM=$stepsim timeout 120 sbatch --wait --array=0-3 --output="$work/task-%a.log" --chdir="$work" \
  "$source_dir/tools/slurm/sweep.sbatch" "$work/out.csv" "${sweep[@]}" >/dev/null ||
  { logs; cat "$work"/task-*.log >&2 || true; fail "the job array did not finish"; }
for k in 0 1 2 3; do
  [ -s "$work/out.shard-$k-of-4.csv" ] || { cat "$work"/task-*.log >&2; fail "task $k wrote no shard file"; }
done
"$stepsim" sweep --merge "$work/merged.csv" "$work"/out.shard-*-of-4.csv 2>/dev/null
cmp "$work/merged.csv" "$work/whole.csv" || fail "the merged rows differ from the unsharded sweep"
echo "slurm job array: $(($(wc -l <"$work/merged.csv") - 1)) rows from 4 tasks equal the unsharded sweep"

# An array with a step runs task ids 0, 2, 4, 6 (SLURM_ARRAY_TASK_STEP 2): shards 0 to 3, not
# shard 2 and three refusals. The sweep's own --jobs wins over the one the script derives from
# --cpus-per-task (given twice, the sweep refused it).
STEPSIM=$stepsim timeout 120 sbatch --wait --array=0-6:2 --cpus-per-task=1 --output="$work/step-%a.log" \
  --chdir="$work" "$source_dir/tools/slurm/sweep.sbatch" "$work/step.csv" "${sweep[@]}" --jobs 2 >/dev/null ||
  { logs; cat "$work"/step-*.log >&2 || true; fail "the job array with a step did not finish"; }
for k in 0 1 2 3; do
  [ -s "$work/step.shard-$k-of-4.csv" ] || { cat "$work"/step-*.log >&2; fail "the array with a step wrote no shard $k"; }
done
"$stepsim" sweep --merge "$work/step-merged.csv" "$work"/step.shard-*-of-4.csv 2>/dev/null
cmp "$work/step-merged.csv" "$work/whole.csv" || fail "the array with a step merges into other rows"
echo "slurm job array with a step: shards 0 to 3 from ids 0, 2, 4, 6 equal the unsharded sweep"

# -o among the sweep's arguments: the script names OUT itself, and says so.
status=0
STEPSIM=$stepsim bash "$source_dir/tools/slurm/sweep.sbatch" "$work/o.csv" "${sweep[@]}" -o "$work/other.csv" \
  2>"$work/o.err" || status=$?
[ "$status" -eq 2 ] && grep -q "the output is the first argument" "$work/o.err" ||
  fail "-o among the arguments: exit $status, $(cat "$work/o.err")"
[ ! -e "$work/o.csv" ] && [ ! -e "$work/other.csv" ] || fail "-o among the arguments wrote rows"
echo "sweep.sbatch: -o among the sweep's arguments refused"
