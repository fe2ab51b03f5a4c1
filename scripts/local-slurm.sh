#!/usr/bin/env bash
# A real single-node Slurm cluster on 127.0.0.1, for tests and for trying the Slurm profile on a laptop.
#
#   scripts/local-slurm.sh start  STATE_DIR   install packages if missing, start the daemons, wait until the node is idle
#   scripts/local-slurm.sh stop   STATE_DIR   stop exactly the daemons that `start` started (by their pid files)
#   scripts/local-slurm.sh status STATE_DIR   show each daemon and the node; exit 0 only when all are up
#   scripts/local-slurm.sh env    STATE_DIR   print `export SLURM_CONF=...` for `eval "$(...)"`
#   scripts/local-slurm.sh install            only install the Debian packages (`make test` does, before its tests)
#   scripts/local-slurm.sh missing            print the Debian packages not installed yet (none: nothing)
#
# Everything the cluster owns lives in STATE_DIR: configs, logs, spool, pid files, a private munged (its own key and
# socket) and a private MariaDB behind slurmdbd, so `sacct` works (the Snakemake slurm plugin polls job states with it).
# The node has one fake GPU (a character device made with mknod): jobs asking for `--gpus=1` get CUDA_VISIBLE_DEVICES=0.
# Clients (sbatch, sacct, snakemake) find the cluster through SLURM_CONF=STATE_DIR/etc/slurm.conf; while it runs,
# /etc/slurm/slurm.conf is a symlink to that file too (removed by `stop`), because nested `srun` calls inside jobs
# get SLURM_* variables stripped. A machine with its own /etc/slurm/slurm.conf is refused.
#
# Needs root (Debian 12 packages, daemons running as root). Both `start` and `stop` are idempotent.
# Environment: LOCAL_SLURM_PORT_BASE (default 6817; uses 4 ports from there), LOCAL_SLURM_CLUSTER (default pdelra),
# LOCAL_SLURM_ACCOUNT (default pdelra), LOCAL_SLURM_TIMEOUT (seconds to wait for each daemon, default 60).
set -euo pipefail

readonly PACKAGES=(slurmctld slurmd slurm-client slurm-wlm-basic-plugins munge slurmdbd slurm-wlm-mysql-plugin
    mariadb-server)
readonly PORT_BASE=${LOCAL_SLURM_PORT_BASE:-6817}
readonly CTLD_PORT=$PORT_BASE SLURMD_PORT=$((PORT_BASE + 1)) DBD_PORT=$((PORT_BASE + 2)) DB_PORT=$((PORT_BASE + 3))
readonly CLUSTER=${LOCAL_SLURM_CLUSTER:-pdelra}
readonly ACCOUNT=${LOCAL_SLURM_ACCOUNT:-pdelra}
readonly TIMEOUT=${LOCAL_SLURM_TIMEOUT:-60}
# Start order; `stop` goes in reverse. Each name has a pid file STATE/run/NAME.pid and a log STATE/log/NAME.log.
readonly DAEMONS=(munged mariadbd slurmdbd slurmctld slurmd)
# Jobs see this cluster through SLURM_CONF, but the Snakemake job-step plugin strips SLURM_* variables before its
# nested `srun`, which then reads the default path. So the default path must point here while the cluster runs.
readonly SYSTEM_CONF=/etc/slurm/slurm.conf

log() { printf 'local-slurm: %s\n' "$*" >&2; }
die() {
    printf 'local-slurm: error: %s\n' "$*" >&2
    exit 1
}

usage() {
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-2}"
}

# --- packages ----------------------------------------------------------------------------------------------------

missing_packages() {
    local pkg
    for pkg in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || echo "$pkg"
    done
}

ensure_packages() {
    local missing
    missing=$(missing_packages)
    [[ -z $missing ]] && return 0
    command -v apt-get >/dev/null || die "packages missing ($(echo $missing)) and apt-get is not available"
    log "installing $(echo $missing) (apt-get, about 30 s)"
    # The image's policy-rc.d forbids postinst scripts from starting daemons; this script starts them itself.
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || die "apt-get update failed"
    # shellcheck disable=SC2086  # word splitting of the package list is intended
    apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 $missing >/dev/null ||
        die "apt-get install failed for: $(echo $missing)"
}

# --- pid files ---------------------------------------------------------------------------------------------------

pid_file() { echo "$STATE/run/$1.pid"; }

# Prints the pid when the daemon named $1 runs from our pid file. The process name is checked too, so a recycled
# pid that now belongs to someone else is never reported (or killed) as ours.
running_pid() {
    local file pid
    file=$(pid_file "$1")
    [[ -s $file ]] || return 1
    pid=$(tr -dc '0-9' <"$file")
    [[ -n $pid && -r /proc/$pid/comm ]] || return 1
    [[ $(cat "/proc/$pid/comm") == "$1" ]] || return 1
    echo "$pid"
}

wait_for() { # wait_for DESCRIPTION LOGFILE COMMAND...: poll COMMAND until it succeeds or TIMEOUT seconds pass
    local what=$1 logfile=$2 deadline=$((SECONDS + TIMEOUT))
    shift 2
    while ((SECONDS < deadline)); do
        timeout 10 "$@" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    log "last lines of $logfile:"
    tail -n 20 "$logfile" >&2 2>/dev/null || true
    die "timed out after ${TIMEOUT}s waiting for $what"
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Refuses to start a daemon whose port another process already holds (another local cluster, a system slurmctld):
# starting anyway would leave clients talking to the wrong daemon.
check_port() {
    port_free "$2" || die "port $2 (needed by $1) is in use by another process; stop it or set LOCAL_SLURM_PORT_BASE"
}

# --- configuration -----------------------------------------------------------------------------------------------

write_atomic() { # write_atomic FILE MODE: stdin -> FILE via a temp file in the same folder
    local tmp
    tmp=$(mktemp "$1.XXXXXX")
    cat >"$tmp"
    chmod "$2" "$tmp"
    mv -f "$tmp" "$1"
}

write_configs() {
    local host node_hw db_pass
    host=$(hostname -s)
    # CPUs/Boards/Sockets/Cores/Threads/RealMemory exactly as slurmd detects them, or the node goes INVAL.
    node_hw=$(slurmd -C | head -n 1 | sed 's/^NodeName=[^ ]* //')
    [[ $node_hw == *CPUs=* ]] || die "could not read the node's hardware from 'slurmd -C'"
    [[ -s $STATE/etc/db-password ]] || head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' |
        write_atomic "$STATE/etc/db-password" 600
    db_pass=$(cat "$STATE/etc/db-password")
    # The fake GPU: Slurm needs a character device for File= (a regular file gives jobs no CUDA_VISIBLE_DEVICES).
    [[ -c $STATE/gpu0 ]] || mknod "$STATE/gpu0" c 1 3

    write_atomic "$STATE/etc/slurm.conf" 644 <<EOF
# Written by scripts/local-slurm.sh; rewritten on every start.
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
CredType=cred/munge
# cred_expire (default 120 s) is also how long a requeued job waits before it may start again (Slurm 22.05:
# begin time = now + cred_expire + 1). A one-node cluster on loopback launches a step in well under a second.
AuthInfo=socket=$STATE/munge/munge.socket,cred_expire=15
MailProg=/bin/true
StateSaveLocation=$STATE/spool/ctld
SlurmdSpoolDir=$STATE/spool/d
SlurmctldPidFile=$(pid_file slurmctld)
SlurmdPidFile=$(pid_file slurmd)
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Without a default memory per CPU one job takes the whole node's memory.
DefMemPerCPU=500
SchedulerType=sched/backfill
ReturnToService=2
# sacct/squeue must still see finished jobs when the Snakemake plugin polls.
MinJobAge=300
KillWait=5
InactiveLimit=0
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
# For the slurmdbd connection Slurm takes the munge socket from here, not from AuthInfo.
AccountingStoragePass=$STATE/munge/munge.socket
AccountingStorageTRES=gres/gpu
JobAcctGatherType=jobacct_gather/linux
GresTypes=gpu
NodeName=$host NodeAddr=127.0.0.1 $node_hw Gres=gpu:1 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
    write_atomic "$STATE/etc/gres.conf" 644 <<EOF
NodeName=$host Name=gpu Count=1 File=$STATE/gpu0
EOF
    # slurmdbd insists on mode 0600: it holds the database password.
    write_atomic "$STATE/etc/slurmdbd.conf" 600 <<EOF
AuthType=auth/munge
AuthInfo=socket=$STATE/munge/munge.socket
DbdAddr=127.0.0.1
DbdHost=localhost
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$(pid_file slurmdbd)
LogFile=$STATE/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$db_pass
StorageLoc=slurm_acct_db
EOF
}

# The symlink at SYSTEM_CONF is ours only when it points into this STATE dir; a real config is never touched.
link_system_conf() {
    if [[ -L $SYSTEM_CONF ]]; then
        local target
        target=$(readlink "$SYSTEM_CONF")
        [[ $target == "$STATE/etc/slurm.conf" ]] && return 0
        [[ -e $target ]] && die "$SYSTEM_CONF links to $target (another local cluster?); stop that one first"
    elif [[ -e $SYSTEM_CONF ]]; then
        die "$SYSTEM_CONF exists: this machine has its own Slurm; use that instead of a local test cluster"
    fi
    mkdir -p "$(dirname "$SYSTEM_CONF")"
    ln -sfn "$STATE/etc/slurm.conf" "$SYSTEM_CONF"
}

unlink_system_conf() {
    [[ -L $SYSTEM_CONF && $(readlink "$SYSTEM_CONF") == "$STATE/etc/slurm.conf" ]] && rm -f "$SYSTEM_CONF"
    return 0
}

# --- daemons -----------------------------------------------------------------------------------------------------

start_munged() {
    # A private munged (own key, own socket) so the cluster neither needs nor disturbs a system munge.
    [[ -s $STATE/etc/munge.key ]] || head -c 1024 /dev/urandom | write_atomic "$STATE/etc/munge.key" 400
    chmod 700 "$STATE/munge"
    rm -f "$STATE/munge/munge.socket" "$STATE/munge/munge.socket.lock"
    munged --force --socket="$STATE/munge/munge.socket" --key-file="$STATE/etc/munge.key" \
        --pid-file="$(pid_file munged)" --log-file="$STATE/log/munged.log" --seed-file="$STATE/munge/seed" \
        </dev/null >/dev/null 2>>"$STATE/log/munged.log"
    wait_for munged "$STATE/log/munged.log" munge -n --socket="$STATE/munge/munge.socket"
}

mariadb_sql() { mariadb --no-defaults --socket="$STATE/run/mariadb.sock" -u root -e "$1"; }

start_mariadbd() {
    check_port mariadbd "$DB_PORT"
    if [[ ! -d $STATE/db/mysql ]]; then
        mariadb-install-db --no-defaults --user=root --datadir="$STATE/db" --auth-root-authentication-method=socket \
            --skip-test-db >"$STATE/log/mariadb-install.log" 2>&1 ||
            die "mariadb-install-db failed; see $STATE/log/mariadb-install.log"
    fi
    # mariadbd does not daemonise: detach it (setsid, no inherited stdio) and let it write its own pid file.
    setsid mariadbd --no-defaults --user=root --datadir="$STATE/db" --socket="$STATE/run/mariadb.sock" \
        --pid-file="$(pid_file mariadbd)" --log-error="$STATE/log/mariadbd.log" --bind-address=127.0.0.1 \
        --port="$DB_PORT" </dev/null >/dev/null 2>&1 &
    wait_for "MariaDB on port $DB_PORT" "$STATE/log/mariadbd.log" \
        mariadb-admin --no-defaults --socket="$STATE/run/mariadb.sock" -u root ping
}

create_database() {
    local pass
    pass=$(cat "$STATE/etc/db-password")
    mariadb_sql "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
        CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
        CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$pass';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';" || die "could not create the accounting database"
}

start_slurmdbd() {
    check_port slurmdbd "$DBD_PORT"
    slurmdbd </dev/null >/dev/null 2>>"$STATE/log/slurmdbd.log"
    wait_for "slurmdbd on port $DBD_PORT" "$STATE/log/slurmdbd.log" sacctmgr -n show cluster
}

register_accounts() {
    # sacctmgr `add` fails on duplicates, so look first: keeps `start` idempotent.
    [[ -n $(sacctmgr -n -P show cluster "$CLUSTER" format=cluster) ]] ||
        sacctmgr -i add cluster "$CLUSTER" >/dev/null || die "sacctmgr could not add cluster $CLUSTER"
    [[ -n $(sacctmgr -n -P show account "$ACCOUNT" format=account) ]] ||
        sacctmgr -i add account "$ACCOUNT" Cluster="$CLUSTER" Description="local test account" >/dev/null ||
        die "sacctmgr could not add account $ACCOUNT"
    [[ -n $(sacctmgr -n -P show assoc user=root account="$ACCOUNT" format=user) ]] ||
        sacctmgr -i add user root Account="$ACCOUNT" Cluster="$CLUSTER" >/dev/null ||
        die "sacctmgr could not add user root to account $ACCOUNT"
}

start_slurmctld() {
    check_port slurmctld "$CTLD_PORT"
    slurmctld -i </dev/null >/dev/null 2>>"$STATE/log/slurmctld.log"
    wait_for "slurmctld on port $CTLD_PORT" "$STATE/log/slurmctld.log" scontrol ping
}

start_slurmd() {
    check_port slurmd "$SLURMD_PORT"
    slurmd -N "$(hostname -s)" </dev/null >/dev/null 2>>"$STATE/log/slurmd.log"
}

node_state() { sinfo -h -N -o %T 2>/dev/null | head -n 1; }

wait_node_idle() {
    local state="" deadline=$((SECONDS + TIMEOUT))
    while ((SECONDS < deadline)); do
        state=$(node_state)
        case $state in
        idle) return 0 ;;
        # A node left down/drained by an earlier unclean stop comes back on request.
        down* | drain* | *drained) scontrol update NodeName="$(hostname -s)" State=RESUME >/dev/null 2>&1 || true ;;
        esac
        sleep 0.2
    done
    log "last lines of $STATE/log/slurmd.log:"
    tail -n 20 "$STATE/log/slurmd.log" >&2 2>/dev/null || true
    die "node did not become idle within ${TIMEOUT}s (state: '${state:-unknown}'); see $STATE/log/"
}

# --- commands ----------------------------------------------------------------------------------------------------

cmd_start() {
    [[ $(id -u) -eq 0 ]] || die "must run as root (it installs packages and starts the Slurm daemons)"
    ensure_packages
    mkdir -p "$STATE"/{etc,log,run,munge,db,spool/ctld,spool/d}
    export SLURM_CONF=$STATE/etc/slurm.conf
    write_configs
    link_system_conf
    local name
    for name in "${DAEMONS[@]}"; do
        if running_pid "$name" >/dev/null; then
            log "$name already running"
        else
            log "starting $name"
            "start_$name"
        fi
        # Accounts must exist before slurmctld starts, so jobs with --account are accepted at once.
        case $name in
        mariadbd) create_database ;;
        slurmdbd) register_accounts ;;
        esac
    done
    wait_node_idle
    log "cluster '$CLUSTER' is up: partition debug, account $ACCOUNT, 1 fake GPU"
    echo "export SLURM_CONF=$SLURM_CONF"
}

stop_daemon() {
    local name=$1 pid i
    pid=$(running_pid "$name") || {
        rm -f "$(pid_file "$name")"
        return 0
    }
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "$name did not stop within 10 s; killing it"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$(pid_file "$name")"
}

cmd_stop() {
    [[ -d $STATE/run ]] || {
        log "nothing to stop in $STATE"
        return 0
    }
    export SLURM_CONF=$STATE/etc/slurm.conf
    # Cancel our own jobs first so no job step outlives its slurmd.
    if running_pid slurmctld >/dev/null; then
        scancel --full --cluster="$CLUSTER" --user=root >/dev/null 2>&1 || true
    fi
    local i
    for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
        stop_daemon "${DAEMONS[i]}"
    done
    unlink_system_conf
}

cmd_status() {
    export SLURM_CONF=$STATE/etc/slurm.conf
    local name pid all_up=0
    for name in "${DAEMONS[@]}"; do
        if pid=$(running_pid "$name"); then
            printf '%-10s running (pid %s)\n' "$name" "$pid"
        else
            printf '%-10s stopped\n' "$name"
            all_up=1
        fi
    done
    if running_pid slurmctld >/dev/null; then
        printf '%-10s %s\n' node "$(node_state)"
    fi
    return "$all_up"
}

case ${1:-} in
-h | --help | help) usage 0 ;;
install | missing)
    [[ $# -eq 1 ]] || usage
    if [[ $1 == install ]]; then ensure_packages; else missing_packages; fi
    exit 0
    ;;
esac
[[ $# -eq 2 ]] || usage
STATE=$(realpath -m -- "$2")
readonly STATE
case $1 in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
env) echo "export SLURM_CONF=$STATE/etc/slurm.conf" ;;
*) usage ;;
esac
