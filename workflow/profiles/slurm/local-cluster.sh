#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine, for the profile's test
# (tests/test_slurm_cluster.py) or to try the profile by hand:
#
#   workflow/profiles/slurm/local-cluster.sh up   /tmp/specproof-slurm   # prints SLURM_CONF=...
#   export SLURM_CONF=/tmp/specproof-slurm/slurm.conf
#   snakemake --profile workflow/profiles/slurm --slurm-no-account --slurm-status-command squeue \
#       --default-resources slurm_partition=local runtime=30 -- study
#   workflow/profiles/slurm/local-cluster.sh down /tmp/specproof-slurm
#
# It installs nothing (`make slurm-deps`, or apt-get install slurm-wlm munge, does). `up`
# writes a munge key and a one-node slurm.conf for this host (its CPUs and memory, from
# `slurmd -C`) under the state directory, starts munged, slurmctld and slurmd there as root,
# and waits until the node is idle; `down` stops the three daemons it started (by their pid
# files) and removes the state directory. Outside it, only the link /run/slurm/conf (below).
#
# No slurmdbd: accounting storage is off, so `sacct` answers "accounting storage is
# disabled". The executor plugin reads job states with `squeue` instead
# (--slurm-status-command squeue), which sees finished jobs for MinJobAge (an hour here);
# every finished job is also written by jobcomp/filetxt to <state>/jobcomp.log (start, end,
# node, CPUs, state), which the test reads as the scheduler's accounting.
set -euo pipefail

usage() { echo "usage: $0 up|down|status STATE_DIR [PARTITION]" >&2; exit 2; }
[[ $# -ge 2 ]] || usage
cmd=$1
state=$(realpath -m "$2")
partition=${3:-local}
conf=$state/slurm.conf

stop_pid() {  # stop_pid PIDFILE: TERM the daemon it names, wait up to 10 s, then KILL
    local f=$1 pid
    [[ -s $f ]] || return 0
    pid=$(cat "$f")
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
}

# Inside a job the executor starts each rule with srun after dropping every SLURM_*
# variable, SLURM_CONF included; srun then looks in /etc/slurm/slurm.conf, then in
# /run/slurm/conf/ (where slurmd keeps a config it fetched). With no /etc/slurm/slurm.conf,
# `up` points /run/slurm/conf at the state directory, and `down` removes that link.
RUN_CONF=${SPECPROOF_SLURM_RUN_CONF:-/run/slurm/conf}

down() {
    if [[ -L $RUN_CONF && $(readlink "$RUN_CONF") == "$state" ]]; then rm -f "$RUN_CONF"; fi
    [[ -d $state ]] || return 0
    # jobs still queued or running are cancelled first, so no job step outlives its slurmd
    local jobs
    if [[ -s $state/slurmctld.pid ]] && kill -0 "$(cat "$state/slurmctld.pid")" 2>/dev/null; then
        jobs=$(SLURM_CONF=$conf timeout 10 squeue -h -o %A 2>/dev/null || true)
        if [[ -n $jobs ]]; then
            SLURM_CONF=$conf timeout 10 scancel $jobs 2>/dev/null || true
            for _ in $(seq 50); do
                [[ -z $(SLURM_CONF=$conf timeout 10 squeue -h -o %A 2>/dev/null) ]] && break
                sleep 0.2
            done
        fi
    fi
    stop_pid "$state/slurmd.pid"
    stop_pid "$state/slurmctld.pid"
    stop_pid "$state/munged.pid"
    rm -rf "$state"
}

fail() {  # fail MESSAGE: one line, the daemons' last log lines, and everything stopped
    echo "local-cluster: $*" >&2
    for log in munged slurmctld slurmd; do
        [[ -s $state/$log.log ]] && tail -n 5 "$state/$log.log" | sed "s/^/  $log: /" >&2
    done
    down
    exit 1
}

up() {
    for bin in munged mungekey slurmctld slurmd sinfo; do
        command -v "$bin" >/dev/null || { echo "local-cluster: $bin not found (make slurm-deps)" >&2; exit 3; }
    done
    [[ $(id -u) -eq 0 ]] || { echo "local-cluster: slurmd must run as root here" >&2; exit 3; }
    down  # a previous cluster in the same directory is stopped first
    if [[ -e /etc/slurm/slurm.conf ]]; then
        echo "local-cluster: /etc/slurm/slurm.conf exists: jobs' srun would read it, not this cluster's" >&2
        exit 3
    fi
    if [[ -L $RUN_CONF && ! -e $RUN_CONF/slurm.conf ]]; then rm -f "$RUN_CONF"; fi  # left by a dead cluster
    if [[ -e $RUN_CONF ]]; then
        echo "local-cluster: $RUN_CONF is another cluster's ($(readlink -f "$RUN_CONF"))" >&2
        exit 3
    fi
    mkdir -p "$state/spool" "$state/ctld" "$state/munge"
    chmod 700 "$state/munge"

    # munge: its own key, socket and pid under the state directory
    mungekey --create --keyfile="$state/munge/munge.key" --force
    chmod 400 "$state/munge/munge.key"
    munged --force --key-file="$state/munge/munge.key" --socket="$state/munge/munge.socket" \
        --pid-file="$state/munged.pid" --log-file="$state/munged.log" \
        --seed-file="$state/munge/munged.seed" || fail "munged did not start"

    local node cpus mem
    node=$(hostname -s)
    # slurmd -C: this host's CPUs, sockets, cores, threads and memory, as slurmd will see them
    local hw
    hw=$(slurmd -C | head -n 1 | sed -E "s/^NodeName=[^ ]+ //")
    cpus=$(sed -E 's/.*CPUs=([0-9]+).*/\1/' <<<"$hw")
    mem=$(sed -E 's/.*RealMemory=([0-9]+).*/\1/' <<<"$hw")
    cat >"$conf" <<EOF
# Written by workflow/profiles/slurm/local-cluster.sh: one node, this host ($cpus CPUs, $mem MB),
# reached at 127.0.0.1 whatever its name resolves to.
ClusterName=specproof
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$state/munge/munge.socket
SlurmctldPort=$((6817 + ${SPECPROOF_SLURM_PORT_OFFSET:-100}))
SlurmdPort=$((6818 + ${SPECPROOF_SLURM_PORT_OFFSET:-100}))
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmctldLogFile=$state/slurmctld.log
SlurmdLogFile=$state/slurmd.log
# no cgroups in a container: processes tracked through /proc, no task binding
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$state/jobcomp.log
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
# finished jobs stay visible to squeue for an hour (the executor reads states from it)
MinJobAge=3600
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MpiDefault=none
NodeName=$node NodeAddr=127.0.0.1 $hw State=UNKNOWN
PartitionName=$partition Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
    mkdir -p "$(dirname "$RUN_CONF")"
    ln -s "$state" "$RUN_CONF"
    export SLURM_CONF=$conf
    slurmctld -f "$conf" || fail "slurmctld did not start"
    slurmd -f "$conf" || fail "slurmd did not start"
    local i
    for i in $(seq 60); do
        if [[ $(sinfo -h -n "$node" -o %t 2>/dev/null) == idle ]]; then
            echo "SLURM_CONF=$conf"
            echo "local-cluster: node $node idle in partition $partition ($cpus CPUs, $mem MB)" >&2
            return 0
        fi
        sleep 0.5
    done
    fail "node $node not idle after 30 s (sinfo: $(sinfo -h -o '%t %E' 2>&1 | head -n 1))"
}

case $cmd in
    up) up ;;
    down) down ;;
    status) SLURM_CONF=$conf sinfo && SLURM_CONF=$conf squeue ;;
    *) usage ;;
esac
