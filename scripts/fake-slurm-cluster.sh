#!/usr/bin/env bash
# A real Slurm cluster of fake nodes on this one machine, for tests and demos:
# munged, slurmctld and one slurmd per node (Debian's slurm is built with
# MULTIPLE_SLURMD, so "slurmd -N nK" on its own port acts as node nK).
#
#   scripts/fake-slurm-cluster.sh start DIR [NODES]   (default 2 nodes)
#   export SLURM_CONF=DIR/slurm.conf
#   srun --mpi=pmix -N2 -n4 build/context_test
#   sbatch -N2 --ntasks-per-node=2 scripts/slurm/train.sbatch configs/small.yaml
#   scripts/fake-slurm-cluster.sh stop DIR
#
# DIR holds slurm.conf, state, spool, logs (DIR/log) and pid files; stop
# kills the daemons by their pid files (munged only if start launched it).
# Ports: slurmctld on $FAKE_SLURM_PORT (default 17000), node K on that + K.
#
# Two settings make fake nodes on one host work (both measured with Slurm 22
# and OpenMPI 4.1 on Debian 12; tests/integration/mpi_slurm.sh runs on them):
#   TmpFS=DIR/tmp/%n   each node its own PMIx folder, otherwise PMIx fails with
#                      'pmixp_mkdir: Cannot create directory ... File exists'
#   TaskProlog         exports OMPI_MCA_btl_vader_backing_directory=DIR/shm/<node>,
#                      otherwise ranks on different fake nodes crash in vader
# The prolog also exports OMPI_MCA_mpi_yield_when_idle=1 since the fake nodes
# share the real cores. Limits of the emulation: every node has the machine's
# hostname and sees the same filesystem; CPUs are advertised per node but are
# the same cores.
# Needs root (munged and slurmd run as root here).
set -euo pipefail

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

(($# >= 2)) || usage
action="$1"
dir="$2"
nodes="${3:-2}"
[[ "$nodes" =~ ^[1-9][0-9]*$ ]] || { echo "fake-slurm-cluster.sh: NODES '$nodes' is not a positive number" >&2; exit 2; }
port="${FAKE_SLURM_PORT:-17000}"

# Sends SIGTERM to the daemons named by pid files, waits up to 10 s for all
# of them (each takes 1-2 s to exit), then SIGKILLs any left.
stop_daemons() {
  local file pid pids=()
  for file in "$@"; do
    [[ -f "$file" ]] || continue
    pid=$(cat "$file")
    if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
    rm -f "$file"
  done
  for _ in $(seq 100); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || return 0
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
}

start() {
  [[ $(id -u) -eq 0 ]] || { echo "fake-slurm-cluster.sh: needs root" >&2; exit 1; }
  for program in munged slurmctld slurmd srun; do
    command -v "$program" >/dev/null || [[ -x "/usr/sbin/$program" ]] ||
      { echo "fake-slurm-cluster.sh: $program missing (run scripts/install-deps.sh)" >&2; exit 1; }
  done
  mkdir -p "$dir"/{state,log,spool,tmp,shm}
  dir="$(cd "$dir" && pwd)"
  local host cpus memory_mb
  host=$(hostname)
  cpus=$(nproc)
  memory_mb=$(awk '/MemTotal/ { print int($2 / 1024 / 2) }' /proc/meminfo)

  # munge: the cluster's authentication. Reuse a running munged.
  if ! munge -n >/dev/null 2>&1; then
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    [[ -f /etc/munge/munge.key ]] || { mungekey --create --keyfile /etc/munge/munge.key && chown munge:munge /etc/munge/munge.key; }
    runuser -u munge -- /usr/sbin/munged
    for _ in $(seq 50); do munge -n >/dev/null 2>&1 && break; sleep 0.1; done
    munge -n >/dev/null 2>&1 || { echo "fake-slurm-cluster.sh: munged did not start" >&2; exit 1; }
    cp /run/munge/munged.pid "$dir/munged.pid"
  fi

  cat >"$dir/task-prolog.sh" <<PROLOG
#!/bin/bash
# Slurm TaskProlog: lines "export K=V" on stdout go into each task's environment.
mkdir -p "$dir/shm/\$SLURMD_NODENAME"
echo "export OMPI_MCA_btl_vader_backing_directory=$dir/shm/\$SLURMD_NODENAME"
echo "export OMPI_MCA_mpi_yield_when_idle=1"
PROLOG
  chmod +x "$dir/task-prolog.sh"

  {
    echo "ClusterName=fake"
    echo "SlurmctldHost=$host(127.0.0.1)"
    echo "SlurmctldPort=$port"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "MpiDefault=pmix"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "TaskProlog=$dir/task-prolog.sh"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    echo "SchedulerType=sched/builtin"
    echo "ReturnToService=2"
    echo "JobCompType=jobcomp/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "MailProg=/bin/true"
    echo "StateSaveLocation=$dir/state"
    echo "SlurmdSpoolDir=$dir/spool/%n"
    echo "TmpFS=$dir/tmp/%n"
    echo "SlurmctldPidFile=$dir/slurmctld.pid"
    echo "SlurmdPidFile=$dir/slurmd-%n.pid"
    echo "SlurmctldLogFile=$dir/log/slurmctld.log"
    echo "SlurmdLogFile=$dir/log/slurmd-%n.log"
    for ((k = 1; k <= nodes; ++k)); do
      echo "NodeName=n$k NodeHostname=$host NodeAddr=127.0.0.1 Port=$((port + k)) CPUs=$cpus RealMemory=$memory_mb"
    done
    echo "PartitionName=debug Nodes=n[1-$nodes] Default=YES State=UP OverSubscribe=FORCE:4 MaxTime=INFINITE"
  } >"$dir/slurm.conf"
  for ((k = 1; k <= nodes; ++k)); do mkdir -p "$dir/spool/n$k" "$dir/tmp/n$k"; done

  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -f "$SLURM_CONF" -i
  for ((k = 1; k <= nodes; ++k)); do slurmd -f "$SLURM_CONF" -N "n$k"; done

  # Ready when every node is idle.
  local idle=0
  for _ in $(seq 100); do
    idle=$(sinfo -h -N -o '%T' 2>/dev/null | grep -c '^idle$' || true)
    ((idle == nodes)) && break
    sleep 0.2
  done
  if ((idle != nodes)); then
    echo "fake-slurm-cluster.sh: only $idle of $nodes nodes came up; logs in $dir/log" >&2
    sinfo -N >&2 || true
    exit 1
  fi
  echo "fake Slurm cluster of $nodes nodes (n1..n$nodes) is up in $dir"
  echo "  export SLURM_CONF=$dir/slurm.conf"
  echo "  srun --mpi=pmix -N$nodes -n$((2 * nodes)) PROGRAM      (--overcommit for more tasks than CPUs)"
  echo "  sbatch -N$nodes --ntasks-per-node=2 scripts/slurm/train.sbatch CONFIG.yaml"
  echo "  scripts/fake-slurm-cluster.sh stop $dir"
}

stop() {
  [[ -d "$dir" ]] || { echo "fake-slurm-cluster.sh: no cluster folder $dir" >&2; exit 1; }
  stop_daemons "$dir"/slurmd-*.pid "$dir/slurmctld.pid"
  stop_daemons "$dir/munged.pid"
  echo "fake Slurm cluster in $dir stopped"
}

case "$action" in
  start) start ;;
  stop) stop ;;
  *) usage ;;
esac
