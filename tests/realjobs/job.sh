#!/bin/bash
# Batch script of the real-jobs suite: 2 ranks of train.py under srun (torchrun of Debian's
# torch 1.13 is broken on Python 3.11). Each rank logs to $FL_LOG_DIR/<job>/rank<N>.log.
# With FL_CGROUP set, each rank moves itself into that memory cgroup (v1) before exec.
set -u
mkdir -p "$FL_LOG_DIR/$SLURM_JOB_ID"
export MASTER_ADDR=127.0.0.1
# the harness gives each job a free port (job numbers start at 1 on every private cluster:
# two sessions on one machine would share 20000 + job)
export MASTER_PORT=${FL_MASTER_PORT:-$((20000 + SLURM_JOB_ID % 20000))}
echo "job $SLURM_JOB_ID restart ${SLURM_RESTART_COUNT:-0} on $SLURM_JOB_NODELIST: ${SLURM_NTASKS} ranks, port $MASTER_PORT"
srun --open-mode=append --output "$FL_LOG_DIR/$SLURM_JOB_ID/rank%t.log" bash -c '
  if [ -n "${FL_CGROUP:-}" ] && [ "$SLURM_PROCID" = "${FL_FAULT_RANK:-1}" ]; then echo $$ > "$FL_CGROUP/cgroup.procs"; fi
  exec /usr/bin/python3 -u "$FL_TRAIN"'
rc=$?
echo "srun exited $rc"
exit $rc
