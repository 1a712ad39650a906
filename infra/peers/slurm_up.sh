#!/bin/bash
# faultline copy of /work/shared/peers/scripts/slurm_up.sh (ports 6917/6918, BASE /tmp/faultline-peers, 4 fake GPUs)
# Single-node Slurm 22.05 (Debian 12 packages) + munge, everything under $BASE (default /tmp/peers).
# Idempotent: re-running while daemons are up just re-checks; FRESH=1 wipes job state first.
set -euo pipefail
BASE=${BASE:-/tmp/faultline-peers}
S=$BASE/slurm; M=$BASE/munge
H=$(hostname -s)
NCPU=${NCPU:-8}            # advertised CPUs (config_overrides lets this exceed the real core count)
export SLURM_CONF=$S/slurm.conf

ACCT=${ACCT:-0}              # ACCT=1: also MariaDB (127.0.0.1:3307) + slurmdbd (127.0.0.1:6819) so sacct works
pkgs="slurm-wlm slurmctld slurmd slurm-client munge"
[ "$ACCT" = 1 ] && pkgs="$pkgs slurmdbd mariadb-server"
dpkg -s $pkgs >/dev/null 2>&1 || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkgs >/dev/null; }
getent hosts "$H" >/dev/null || echo "127.0.0.1 $H" >> /etc/hosts

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# ---- munge (socket dir must be 755, key dir 7x1, key 0400, all owned by munge) ----
mkdir -p $M/run
[ -s $M/munge.key ] || { dd if=/dev/urandom of=$M/munge.key bs=1024 count=1 2>/dev/null; chmod 400 $M/munge.key; }
chown -R munge:munge $M; chmod 711 $M; chmod 755 $M/run
if ! alive $M/run/munged.pid; then
  runuser -u munge -- /usr/sbin/munged --key-file=$M/munge.key --socket=$M/run/munge.sock \
     --pid-file=$M/run/munged.pid --log-file=$M/munged.log --seed-file=$M/munged.seed
fi

# ---- slurm ----
if [ "${FRESH:-0}" = 1 ] && ! alive $S/run/slurmctld.pid; then rm -rf $S/state $S/spool $S/log; fi
mkdir -p $S/state $S/spool $S/log $S/run
cat > $S/slurm.conf.new <<CONF
ClusterName=peers
SlurmctldHost=$H(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=${SLURMCTLD_PORT:-6917}
SlurmdPort=${SLURMD_PORT:-6918}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$M/run/munge.sock
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/$( [ "$ACCT" = 1 ] && echo linux || echo none )
$( if [ "$ACCT" = 1 ]; then echo "AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=${SLURMDBD_PORT:-6819}
AccountingStoragePass=$M/run/munge.sock"; else echo "AccountingStorageType=accounting_storage/none"; fi )
JobCompType=jobcomp/filetxt
JobCompLoc=$S/log/jobcomp.txt
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=${MINJOBAGE:-300}
KillWait=2
OverTimeLimit=0
InactiveLimit=0
MpiDefault=none
SwitchType=switch/none
GresTypes=gpu
NodeName=$H NodeAddr=127.0.0.1 CPUs=$NCPU RealMemory=1000 Gres=gpu:${NGPU:-4} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
mv $S/slurm.conf.new $S/slurm.conf
# fake GPUs (empty files as device nodes): jobs can request --gres=gpu:N so TRES/gres parsing is exercised
NG=${NGPU:-4}; mkdir -p $S/dev; for i in $(seq 0 $((NG - 1))); do : > $S/dev/fakegpu$i; done
printf 'AutoDetect=off\nNodeName=%s Name=gpu File=%s/dev/fakegpu[0-%d]\n' "$H" "$S" $((NG - 1)) > $S/gres.conf

t0=$(date +%s.%N)
if [ "$ACCT" = 1 ]; then
  DB=$BASE/mysql; mkdir -p $DB; chown mysql:mysql $DB
  [ -d $DB/data/mysql ] || mariadb-install-db --no-defaults --datadir=$DB/data --user=mysql \
        --auth-root-authentication-method=normal --skip-test-db > $DB/install.log 2>&1
  if ! alive $DB/mysqld.pid; then
    setsid mariadbd --no-defaults --datadir=$DB/data --socket=$DB/mysqld.sock --port=${MYSQL_PORT:-3307} --bind-address=127.0.0.1 \
        --pid-file=$DB/mysqld.pid --log-error=$DB/err.log --user=mysql --skip-log-bin \
        --innodb-buffer-pool-size=1G --innodb-lock-wait-timeout=900 </dev/null >/dev/null 2>&1 &
    for i in $(seq 1 200); do mariadb -S $DB/mysqld.sock -e 'select 1' >/dev/null 2>&1 && break; sleep 0.05; done
  fi
  mariadb -S $DB/mysqld.sock -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
    CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmpw'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
    CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
  # slurmdbd has no -f: it reads slurmdbd.conf from the directory of $SLURM_CONF; must be mode 600, owned by SlurmUser
  cat > $S/slurmdbd.conf <<CONF
AuthType=auth/munge
AuthInfo=socket=$M/run/munge.sock
DbdHost=$H
DbdAddr=127.0.0.1
DbdPort=${SLURMDBD_PORT:-6819}
SlurmUser=root
PidFile=$S/run/slurmdbd.pid
LogFile=$S/log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=${MYSQL_PORT:-3307}
StorageUser=slurm
StoragePass=slurmpw
StorageLoc=slurm_acct_db
CONF
  chmod 600 $S/slurmdbd.conf
  alive $S/run/slurmdbd.pid || slurmdbd
  for i in $(seq 1 50); do timeout 5 sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.1; done
  timeout 5 sacctmgr -n list cluster format=cluster | grep -qw peers || timeout 5 sacctmgr -i add cluster peers >/dev/null
fi
alive $S/run/slurmctld.pid || slurmctld -f $S/slurm.conf
alive $S/run/slurmd.pid    || slurmd -f $S/slurm.conf
for i in $(seq 1 100); do
  st=$(timeout 2 sinfo -h -n "$H" -o "%T" 2>/dev/null || true)
  case "$st" in idle|mixed|allocated) break;; esac
  sleep 0.1
done
t1=$(date +%s.%N)
alive $S/run/slurmctld.pid || { echo "slurmctld did not start:"; tail -5 $S/log/slurmctld.log; exit 1; }
echo "slurm node $H state=$st ready after $(echo "$t1 - $t0" | bc) s"
echo "export SLURM_CONF=$S/slurm.conf"
