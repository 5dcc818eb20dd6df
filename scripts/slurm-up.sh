#!/usr/bin/env bash
# Bring up a single-node Slurm cluster on this machine (root; Debian's slurmctld, slurmd, munge),
# without systemd. Everything lives under $SLURM_TEST_DIR (default /tmp/orchestrator-slurm):
# config, state, logs and PID files; scripts/slurm-down.sh stops it by those PID files.
# Settings that work without systemd: linuxproc, task/none (cgroup binding breaks gloo at exit), NoInAddrAny.
# SLURM_MAX_ARRAY_SIZE sets MaxArraySize (default 1001, Slurm's); on a running cluster a changed
# config is applied with `scontrol reconfigure`, so the same script also restores the default.
set -euo pipefail
DIR=${SLURM_TEST_DIR:-/tmp/orchestrator-slurm}
MAX_ARRAY_SIZE=${SLURM_MAX_ARRAY_SIZE:-1001}
[ "$(id -u)" = 0 ] || { echo "slurm-up: needs root" >&2; exit 3; }
for bin in slurmctld slurmd munged sbatch; do
  command -v $bin >/dev/null || { echo "slurm-up: $bin not installed (scripts/system-deps.sh)" >&2; exit 3; }
done
mkdir -p "$DIR"/{state,spool,log,run} /etc/munge /run/munge /var/lib/munge /var/log/munge
chmod 700 /etc/munge; chmod 755 /run/munge
[ -s /etc/munge/munge.key ] || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
chmod 400 /etc/munge/munge.key
if ! munge -n >/dev/null 2>&1; then
  munged --force --pid-file="$DIR/run/munged.pid" --socket=/run/munge/munge.socket.2
  for _ in $(seq 50); do munge -n >/dev/null 2>&1 && break; sleep 0.1; done
fi
# More CPU slots than cores (config_overrides): a hanging test job must not starve the others.
cpus=$(( $(nproc) * 4 )); mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
mkdir -p /etc/slurm
old_conf=$(cat /etc/slurm/slurm.conf 2>/dev/null || true)
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=orchestrator-test
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SlurmdParameters=config_overrides
ReturnToService=2
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
KillWait=5
OverTimeLimit=0
InactiveLimit=0
MinJobAge=600
MaxArraySize=$MAX_ARRAY_SIZE
MessageTimeout=20
SchedulerParameters=sched_interval=2,bf_interval=2
NodeName=localhost CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
if ! scontrol ping 2>/dev/null | grep -q UP; then
  slurmctld -c -i
  for _ in $(seq 100); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.1; done
elif [ "$old_conf" != "$(cat /etc/slurm/slurm.conf)" ]; then
  scontrol reconfigure
fi
if ! [ -s "$DIR/run/slurmd.pid" ] || ! kill -0 "$(cat "$DIR/run/slurmd.pid")" 2>/dev/null; then
  slurmd
fi
for _ in $(seq 100); do
  sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)' && break; sleep 0.2
done
scontrol update nodename=localhost state=resume >/dev/null 2>&1 || true
sinfo -h -o "%P %T %D %c" | grep -qE 'idle|mixed|allocated' || { echo "slurm-up: node not ready" >&2; sinfo; exit 1; }
echo "slurm up: $(sinfo -h -o '%P %T %c CPUs'), $(scontrol show config | grep -o 'MaxArraySize *= *[0-9]*')"
