#!/bin/bash
# Stop slurmd, slurmctld, slurmdbd, mariadbd, munged started by slurm_up.sh (by PID file).
# SIGTERM to all at once, then wait (each needs 1.5-3 s to exit; sequentially ~10 s, in parallel ~3 s).
BASE=${BASE:-/tmp/faultline-peers}
pids=()
for p in $BASE/slurm/run/slurmd.pid $BASE/slurm/run/slurmctld.pid $BASE/slurm/run/slurmdbd.pid $BASE/mysql/mysqld.pid $BASE/munge/run/munged.pid; do
  [ -s "$p" ] || continue
  pid=$(cat "$p"); kill "$pid" 2>/dev/null && pids+=("$pid")
done
for pid in "${pids[@]}"; do
  for i in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
done
true
