#!/usr/bin/env bash
# Starts and stops a Varlog v0.30 cluster on loopback for tests and benchmarks, and injects
# the faults the cluster tests need. See `varlog-cluster.sh --help`.
set -euo pipefail

SCRIPT=$(readlink -f "${BASH_SOURCE[0]}")
REPO=$(dirname "$(dirname "$SCRIPT")")

usage() {
    cat <<'EOF'
Usage: varlog-cluster.sh COMMAND --dir DIR [options]

Runs a Varlog cluster on 127.0.0.1 from a Varlog v0.30 `bin` directory: metadata
repository (MR) nodes, one admin (varlogadm) and storage nodes (SN), on free ports taken
from a range (never Varlog's defaults), with data, logs and the state file in DIR.

Binaries: $VARLOG_BIN, or --bin DIR. Without either, ../shared/varlog relative to the
repository root is unpacked (its ./unpack) once into --unpack-dir DIR ($VARLOG_UNPACK_DIR;
default build/varlog-bin) and used from there.

Commands:
  start       start a cluster; writes DIR/cluster.env (shell-sourceable) and prints it
              --sns N           storage nodes (default 1; also --storage-nodes N)
              --rf R            replication factor, R <= N (default 1; also
                                --replication-factor R)
              --mrs M           metadata repository nodes, 1 or 3 (default 1)
              --topics T        topics (default 1)
              --log-streams L   log streams per topic (default 1)
              --ls-parallel J   `logstream add` calls in flight at once (default 32).
                                One call takes 7-10 s, most of it waiting; concurrent
                                calls overlap. Measured on loopback, 4 SN, RF 2, 2 vCPU
                                shared (load average 15-30): 8 log streams added in
                                10 s (one alone: 7-10 s), 32 in 18 s, 256 in 102 s
                                (about 0.4 s each once many are in flight; the whole
                                start 13, 20 and 105 s); J 1 adds them one at a time,
                                as before
              --auto-unseal     varlogadm --auto-unseal (from once the log streams are added:
                                v0.30's can panic in an add)
              --owner-pid PID   stop everything when process PID exits (a supervisor
                                polls it every second; covers SIGKILL of the owner)
              --sn-arg ARG      extra varlogsn argument (repeatable), e.g.
                                --sn-arg=--storage-datadb-no-sync
              --port-range LO-HI  ports to pick from (default 20000-32000)
  stop        SIGTERM every process started for DIR, SIGKILL after --term-timeout
              seconds (default 10), remove the data (logs and cluster.env.stopped stay)
  kill-sn K   SIGKILL storage node K (1-based)
  restart-sn K  start it again (same flags, volume) and return once its log streams take
              appends again: with --auto-unseal when every log stream with a replica on
              node K is RUNNING again (the MR's status and node K's replica, as the admin
              reports them); without, after `logstream unseal` of each such log stream
              succeeded (retried every second; a failure "invalid state", a replica still
              SEALING, is followed by `logstream seal`, which brings it up to date and
              SEALED). Measured on loopback, 3 SN, RF 3: 8.5-15.4 s after the restart
              with --auto-unseal, 1.4-2.5 s without. Bounded by
              $VARLOG_RESTART_SN_WAIT seconds (default 60; non-zero exit when it passes);
              --no-wait or VARLOG_RESTART_SN_WAIT=0: return once the node listens
  kill-mr K   SIGKILL MR node K (1-based)             restart-mr K   same flags, raft dir
  add-ls      varlogctl logstream add --timeout 60s [--topic T]; prints the new id
  seal L      varlogctl logstream seal   [--topic T] (topic default: the first)
  unseal L    varlogctl logstream unseal [--topic T]
  ctl ARGS    runs varlogctl ARGS --admin ADDR (ARGS before --admin)
  logs        prints the tail of every process's log [--lines N] (default 30)
  status      prints cluster.env and which processes are alive
  bin         prints the binaries' directory (unpacking them as start would); no --dir

cluster.env: VARLOG_MR_ADDRS (comma-separated, for metadata.addresses), VARLOG_ADMIN_ADDR,
VARLOG_TOPIC_ID (the first topic), VARLOG_TOPIC_IDS, VARLOG_LOG_STREAMS (of the first
topic, comma-separated), VARLOG_TOPIC_<T>_LOG_STREAMS, VARLOG_SN_COUNT, VARLOG_SN_<K>_ADDR,
_PID, _ID, _VOLUME, VARLOG_MR_COUNT, VARLOG_MR_<K>_ADDR, _RAFT, _DEBUG, _PID,
VARLOG_ADMIN_PID, VARLOG_SUPERVISOR_PID, VARLOG_BIN, VARLOG_READY=1 once start finished.
Rewritten (atomically) by every command that changes it; a PID of 0 means not running.

Example:
  scripts/varlog-cluster.sh start --dir build/c1 --sns 3 --rf 3 --log-streams 2
  . build/c1/cluster.env; build/cli/varlog-cli --mr "$VARLOG_MR_ADDRS" topics
  scripts/varlog-cluster.sh stop --dir build/c1
EOF
}

die() {
    echo "varlog-cluster: $*" >&2
    exit 1
}
say() { echo "varlog-cluster: $*" >&2; }

# ---- options ---------------------------------------------------------------------------------
CMD=${1:-}
[[ -z $CMD || $CMD == -h || $CMD == --help || $CMD == help ]] && {
    usage
    exit 0
}
shift
DIR= SNS=1 RF=1 MRS=1 TOPICS=1 LSS=1 LS_PARALLEL=32 AUTO_UNSEAL=0 OWNER=0 BIN=${VARLOG_BIN:-} TOPIC= NO_WAIT=0
UNPACK_DIR=${VARLOG_UNPACK_DIR:-$REPO/build/varlog-bin}
PORT_LO=20000 PORT_HI=32000 TERM_TIMEOUT=10 LINES=30 FROM_SUPERVISOR=0
SN_ARGS=() POS=()
while (($#)); do
    case $1 in
    --dir) DIR=$2; shift ;;
    --dir=*) DIR=${1#*=} ;;
    --sns | --storage-nodes) SNS=$2; shift ;;
    --rf | --replication-factor) RF=$2; shift ;;
    --ls-parallel) LS_PARALLEL=$2; shift ;;
    --mrs) MRS=$2; shift ;;
    --topics) TOPICS=$2; shift ;;
    --log-streams) LSS=$2; shift ;;
    --auto-unseal) AUTO_UNSEAL=1 ;;
    --owner-pid) OWNER=$2; shift ;;
    --bin) BIN=$2; shift ;;
    --unpack-dir) UNPACK_DIR=$2; shift ;;
    --topic) TOPIC=$2; shift ;;
    --sn-arg) SN_ARGS+=("$2"); shift ;;
    --sn-arg=*) SN_ARGS+=("${1#*=}") ;;
    --port-range) PORT_LO=${2%-*}; PORT_HI=${2#*-}; shift ;;
    --term-timeout) TERM_TIMEOUT=$2; shift ;;
    --lines) LINES=$2; shift ;;
    --from-supervisor) FROM_SUPERVISOR=1 ;;
    --no-wait) NO_WAIT=1 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; POS+=("$@"); break ;;
    *) POS+=("$1") ;;
    esac
    shift
done
if [[ $CMD == bin ]]; then
    true
else
    [[ -n $DIR ]] || die "--dir DIR is required (see --help)"
fi
if [[ -n $DIR ]]; then
    mkdir -p "$DIR"
    DIR=$(readlink -f "$DIR")
fi
ENV_FILE=$DIR/cluster.env
LOGS=$DIR/logs
DATA=$DIR/data

int_opt() { [[ $2 =~ ^[0-9]+$ ]] || die "$1 wants a number, not '$2'"; }

# ---- state -----------------------------------------------------------------------------------
# Everything a later command needs is in cluster.env; commands load it, change variables and
# write it back whole, through a rename so that a reader never sees half a file.
load_env() {
    [[ -f $ENV_FILE ]] || die "no cluster in $DIR ($ENV_FILE missing)"
    # shellcheck disable=SC1090
    . "$ENV_FILE"
}

# KEY='value': readable by a shell and, without a shell, by stripping the quotes ('\'' is
# the only escape, for a quote inside a value).
kv() {
    local val=${2//\'/\'\\\'\'}
    printf "%s='%s'\n" "$1" "$val"
}

save_env() {
    local tmp=$ENV_FILE.tmp.$$ k t
    {
        echo "# written by scripts/varlog-cluster.sh; sourceable"
        for v in VARLOG_CLUSTER_DIR VARLOG_BIN VARLOG_CLUSTER_ID VARLOG_RF VARLOG_AUTO_UNSEAL \
            VARLOG_OWNER_PID VARLOG_SUPERVISOR_PID VARLOG_MR_COUNT VARLOG_MR_ADDRS \
            VARLOG_ADMIN_ADDR VARLOG_ADMIN_PID VARLOG_SN_COUNT VARLOG_SN_ADDRS VARLOG_SN_ARGS \
            VARLOG_TOPIC_IDS VARLOG_TOPIC_ID VARLOG_LOG_STREAMS; do
            kv "$v" "${!v:-}"
        done
        for ((k = 1; k <= ${VARLOG_MR_COUNT:-0}; k++)); do
            for f in ADDR RAFT DEBUG PID DIR JOIN; do
                v=VARLOG_MR_${k}_$f
                kv "$v" "${!v:-}"
            done
        done
        for ((k = 1; k <= ${VARLOG_SN_COUNT:-0}; k++)); do
            for f in ADDR ID PID VOLUME; do
                v=VARLOG_SN_${k}_$f
                kv "$v" "${!v:-}"
            done
        done
        for t in ${VARLOG_TOPIC_IDS//,/ }; do
            v=VARLOG_TOPIC_${t}_LOG_STREAMS
            kv "$v" "${!v:-}"
        done
        kv VARLOG_READY "${VARLOG_READY:-0}"
    } >"$tmp"
    mv -f "$tmp" "$ENV_FILE"
}

# ---- binaries --------------------------------------------------------------------------------
find_bin() {
    if [[ -z $BIN ]]; then
        local shared=$REPO/../shared/varlog
        [[ -x $shared/unpack ]] ||
            die "no Varlog binaries: set VARLOG_BIN=DIR (a Varlog v0.30 bin directory) or --bin DIR, or provide ../shared/varlog"
        BIN=$UNPACK_DIR
        if [[ ! -x $BIN/varlogsn ]]; then
            # One unpack at a time: test programs may start side by side.
            mkdir -p "$(dirname "$BIN")"
            (
                flock 9
                [[ -x $BIN/varlogsn ]] || "$shared/unpack" "$BIN" >&2
            ) 9>"$BIN.lock" || die "unpacking $shared into $BIN failed"
        fi
    fi
    BIN=$(readlink -f "$BIN")
    local b
    for b in varlogmr varlogadm varlogsn varlogctl; do
        [[ -x $BIN/$b ]] || die "$BIN/$b is missing or not executable (VARLOG_BIN must name a Varlog bin directory)"
    done
}

# ---- ports -----------------------------------------------------------------------------------
declare -A TAKEN=()
port_busy() {
    if command -v ss >/dev/null; then
        [[ -n $(ss -Htan "( sport = :$1 )" 2>/dev/null) ]]
    else
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
    fi
}

# Sets PORT to a port of the range that no socket of this machine uses, nor an earlier pick.
pick_port() {
    local tries=0 p
    while :; do
        p=$((PORT_LO + (RANDOM * 32768 + RANDOM) % (PORT_HI - PORT_LO)))
        if [[ -z ${TAKEN[$p]:-} ]] && ! port_busy "$p"; then
            TAKEN[$p]=1
            PORT=$p
            return
        fi
        ((++tries < 500)) || die "no free port in $PORT_LO-$PORT_HI"
    done
}

# ---- processes -------------------------------------------------------------------------------
now_ms() { date +%s%3N; }

# True when pid runs one of the Varlog binaries (guards against a recycled PID).
ours() {
    local pid=$1 exe
    [[ $pid =~ ^[1-9][0-9]*$ ]] || return 1
    exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
    [[ $(basename "${exe% (deleted)}") == varlog* ]] || return 1
    # A zombie has exited already.
    [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) != Z ]]
}

# Starts a process detached from the caller (own session, no inherited stdio), appending its
# output to a log file; sets STARTED_PID.
launch() {
    local log=$1
    shift
    echo "=== $(date '+%F %T') $*" >>"$log"
    setsid "$@" </dev/null >>"$log" 2>&1 &
    STARTED_PID=$!
}

tail_log() {
    local f=$1
    [[ -f $f ]] || return 0
    echo "---- last $LINES lines of $f" >&2
    tail -n "$LINES" "$f" >&2
}

# Waits until 127.0.0.1:port accepts connections, failing fast when pid exits.
wait_port() {
    local pid=$1 port=$2 what=$3 log=$4 deadline=$(($(now_ms) + ${5:-30000}))
    until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
        if ! kill -0 "$pid" 2>/dev/null; then
            tail_log "$log"
            die "$what exited before listening on 127.0.0.1:$port"
        fi
        (($(now_ms) < deadline)) || {
            tail_log "$log"
            die "$what did not listen on 127.0.0.1:$port within $((${5:-30000} / 1000)) s"
        }
        sleep 0.1
    done
}

wait_gone() {
    local deadline=$(($(now_ms) + $2)) pid
    for pid in $1; do
        while ours "$pid"; do
            (($(now_ms) < deadline)) || return 1
            sleep 0.1
        done
    done
}

ctl() { "$VARLOG_BIN/varlogctl" "$@" --admin "$VARLOG_ADMIN_ADDR"; }

# Retries a varlogctl command until it succeeds or ms pass (the admin learns of new nodes and
# of the MR leader a moment after they start); prints its output.
ctl_retry() {
    local ms=$1 out deadline
    shift
    deadline=$(($(now_ms) + ms))
    while :; do
        if out=$(ctl "$@" 2>&1); then
            printf '%s\n' "$out"
            return 0
        fi
        if (($(now_ms) >= deadline)); then
            say "varlogctl $* failed: $out"
            return 1
        fi
        sleep 0.5
    done
}

json_int() { grep -o "\"$1\": *[0-9]*" | head -n1 | grep -o '[0-9]*$'; }

start_mr() {
    local k=$1 join=$2 pid raft peers=() j
    local addr_v=VARLOG_MR_${k}_ADDR raft_v=VARLOG_MR_${k}_RAFT dbg_v=VARLOG_MR_${k}_DEBUG
    local dir_v=VARLOG_MR_${k}_DIR
    if ((join)); then
        for ((j = 1; j < k; j++)); do
            raft=VARLOG_MR_${j}_RAFT
            peers+=(--peers "${!raft}")
        done
        peers=(--join "${peers[@]}")
    fi
    mkdir -p "${!dir_v}"
    launch "$LOGS/mr$k.log" "$VARLOG_BIN/varlogmr" start --cluster-id "$VARLOG_CLUSTER_ID" \
        --replication-factor "$VARLOG_RF" --raft-address "${!raft_v}" --bind "${!addr_v}" \
        --debug-address "${!dbg_v}" --raft-dir "${!dir_v}" "${peers[@]}" --logtostderr
    printf -v "VARLOG_MR_${k}_PID" '%s' "$STARTED_PID"
    printf -v "VARLOG_MR_${k}_JOIN" '%s' "$join"
    save_env
    # A joining node serves RPC only once the group took it in (cmd_start registers it).
    ((${3:-1})) || return 0
    wait_port "$STARTED_PID" "${!addr_v##*:}" "varlogmr $k" "$LOGS/mr$k.log"
}

start_sn() {
    local k=$1 addr_v=VARLOG_SN_${k}_ADDR id_v=VARLOG_SN_${k}_ID vol_v=VARLOG_SN_${k}_VOLUME
    local extra=()
    [[ -n ${VARLOG_SN_ARGS:-} ]] && read -r -a extra <<<"$VARLOG_SN_ARGS"
    mkdir -p "${!vol_v}"
    launch "$LOGS/sn$k.log" "$VARLOG_BIN/varlogsn" start --cluster-id "$VARLOG_CLUSTER_ID" \
        --snid "${!id_v}" --listen "${!addr_v}" --advertise "${!addr_v}" \
        --volumes "${!vol_v}" "${extra[@]}" --logtostderr
    printf -v "VARLOG_SN_${k}_PID" '%s' "$STARTED_PID"
    save_env
    wait_port "$STARTED_PID" "${!addr_v##*:}" "varlogsn $k" "$LOGS/sn$k.log"
}

# The supervisor: stops the cluster when the owner process is gone (also after SIGKILL),
# and exits by itself once the cluster was stopped. Its stdio is a log file, so a caller
# reading the start command's output through a pipe sees it end.
supervise() {
    load_env
    local owner=$VARLOG_OWNER_PID start_time
    start_time=$(awk '{print $22}' "/proc/$owner/stat" 2>/dev/null) || start_time=
    while [[ -f $ENV_FILE ]]; do
        if [[ -z $start_time || $(awk '{print $22}' "/proc/$owner/stat" 2>/dev/null) != "$start_time" ]]; then
            say "owner $owner is gone: stopping the cluster in $DIR"
            "$SCRIPT" stop --dir "$DIR" --from-supervisor || true
            return
        fi
        sleep 1
    done
}

cmd_start() {
    int_opt --sns "$SNS"
    int_opt --rf "$RF"
    int_opt --mrs "$MRS"
    int_opt --topics "$TOPICS"
    int_opt --log-streams "$LSS"
    int_opt --ls-parallel "$LS_PARALLEL"
    ((LS_PARALLEL >= 1)) || die "--ls-parallel must be at least 1"
    int_opt --owner-pid "$OWNER"
    ((SNS >= 1 && RF >= 1 && RF <= SNS)) || die "need 1 <= --rf ($RF) <= --sns ($SNS)"
    ((MRS == 1 || MRS == 3)) || die "--mrs must be 1 or 3, not $MRS"
    ((PORT_LO >= 1024 && PORT_HI > PORT_LO + 100 && PORT_HI <= 65535)) ||
        die "bad --port-range $PORT_LO-$PORT_HI"
    if [[ -f $ENV_FILE ]]; then
        load_env
        local p alive=
        for p in $(all_pids); do ours "$p" && alive+=" $p"; done
        [[ -z $alive ]] || die "a cluster already runs in $DIR (PIDs$alive): stop it first"
    fi
    find_bin
    # Logs of an earlier cluster in DIR go: a failure shows this run's tails. Restarts of a
    # node within the run append to its log.
    rm -rf "$DATA" "$LOGS"
    mkdir -p "$LOGS" "$DATA"

    local k
    VARLOG_CLUSTER_DIR=$DIR VARLOG_BIN=$BIN VARLOG_CLUSTER_ID=1 VARLOG_RF=$RF
    VARLOG_AUTO_UNSEAL=$AUTO_UNSEAL VARLOG_OWNER_PID=$OWNER VARLOG_SUPERVISOR_PID=0
    VARLOG_MR_COUNT=$MRS VARLOG_SN_COUNT=$SNS VARLOG_SN_ARGS="${SN_ARGS[*]}"
    VARLOG_TOPIC_IDS= VARLOG_TOPIC_ID= VARLOG_LOG_STREAMS= VARLOG_READY=0
    VARLOG_ADMIN_PID=0
    local mr_addrs=() sn_addrs=()
    for ((k = 1; k <= MRS; k++)); do
        pick_port
        printf -v "VARLOG_MR_${k}_ADDR" '127.0.0.1:%s' "$PORT"
        mr_addrs+=("127.0.0.1:$PORT")
        pick_port
        printf -v "VARLOG_MR_${k}_RAFT" 'http://127.0.0.1:%s' "$PORT"
        pick_port
        printf -v "VARLOG_MR_${k}_DEBUG" '127.0.0.1:%s' "$PORT"
        printf -v "VARLOG_MR_${k}_DIR" '%s' "$DATA/mr$k"
        printf -v "VARLOG_MR_${k}_PID" 0
    done
    pick_port
    VARLOG_ADMIN_ADDR=127.0.0.1:$PORT
    for ((k = 1; k <= SNS; k++)); do
        pick_port
        printf -v "VARLOG_SN_${k}_ADDR" '127.0.0.1:%s' "$PORT"
        sn_addrs+=("127.0.0.1:$PORT")
        printf -v "VARLOG_SN_${k}_ID" '%s' "$k"
        printf -v "VARLOG_SN_${k}_VOLUME" '%s' "$DATA/sn$k"
        printf -v "VARLOG_SN_${k}_PID" 0
    done
    VARLOG_MR_ADDRS=$(
        IFS=,
        echo "${mr_addrs[*]}"
    )
    VARLOG_SN_ADDRS=$(
        IFS=,
        echo "${sn_addrs[*]}"
    )
    save_env

    # From here on a failure stops what was started.
    trap 'rc=$?; if ((rc)); then say "start failed; stopping what was started"; "$SCRIPT" stop --dir "$DIR" >&2 || true; fi' EXIT
    if ((OWNER)); then
        setsid "$SCRIPT" _supervise --dir "$DIR" </dev/null >>"$LOGS/supervisor.log" 2>&1 &
        VARLOG_SUPERVISOR_PID=$!
        save_env
    fi

    local t0
    t0=$(now_ms)
    start_mr 1 0
    # varlogadm v0.30 with --auto-unseal can panic in a log stream add (admin.go's
    # waitUnsealed reads the new log stream from a metadata view that may not have it yet):
    # it adds them without the flag and restarts with it below.
    start_admin 0
    for ((k = 2; k <= MRS; k++)); do
        start_mr "$k" 1 0
        local raft_v=VARLOG_MR_${k}_RAFT addr_v=VARLOG_MR_${k}_ADDR pid_v=VARLOG_MR_${k}_PID
        ctl_retry 60000 mr add --raft-url "${!raft_v}" --rpc-addr "${!addr_v}" --timeout 30s \
            >>"$LOGS/start.log" || die "registering MR $k failed (see $LOGS/mr$k.log)"
        wait_port "${!pid_v}" "${!addr_v##*:}" "varlogmr $k" "$LOGS/mr$k.log"
    done
    for ((k = 1; k <= SNS; k++)); do start_sn "$k"; done
    for ((k = 1; k <= SNS; k++)); do
        local addr_v=VARLOG_SN_${k}_ADDR id_v=VARLOG_SN_${k}_ID
        ctl_retry 30000 storagenode add --snid "${!id_v}" --addr "${!addr_v}" --timeout 60s \
            >>"$LOGS/start.log" || die "storagenode add $k failed (see $LOGS/admin.log)"
    done
    local t out tpid ids=()
    for ((t = 0; t < TOPICS; t++)); do
        out=$(ctl_retry 30000 topic add --timeout 60s) || die "topic add failed"
        echo "$out" >>"$LOGS/start.log"
        tpid=$(json_int topicId <<<"$out")
        [[ -n $tpid ]] || die "topic add printed no topicId: $out"
        ids+=("$tpid")
        VARLOG_TOPIC_IDS=$(
            IFS=,
            echo "${ids[*]}"
        )
        [[ -n $VARLOG_TOPIC_ID ]] || VARLOG_TOPIC_ID=$tpid
        printf -v "VARLOG_TOPIC_${tpid}_LOG_STREAMS" '%s' ""
        save_env
        add_log_streams "$tpid" "$LSS"
    done
    if ((AUTO_UNSEAL)); then
        kill -TERM "$VARLOG_ADMIN_PID" 2>/dev/null || true
        wait_gone "$VARLOG_ADMIN_PID" $((TERM_TIMEOUT * 1000)) ||
            die "varlogadm did not exit within $TERM_TIMEOUT s of SIGTERM (restarting it with --auto-unseal)"
        start_admin 1
    fi
    VARLOG_READY=1
    save_env
    trap - EXIT
    say "cluster ready in $((($(now_ms) - t0) / 1000)) s: MR $VARLOG_MR_ADDRS, admin $VARLOG_ADMIN_ADDR, topic(s) $VARLOG_TOPIC_IDS, log streams $VARLOG_LOG_STREAMS"
    cat "$ENV_FILE"
}

# Adds a log stream to topic $1, records it in cluster.env and prints its id.
add_log_stream() {
    local tpid=$1 out lsid v
    out=$(ctl logstream add --tpid "$tpid" --timeout 60s 2>&1) || {
        tail_log "$LOGS/admin.log"
        die "logstream add to topic $tpid failed: $out"
    }
    echo "$out" >>"$LOGS/start.log"
    lsid=$(json_int logStreamId <<<"$out")
    [[ -n $lsid ]] || die "logstream add printed no logStreamId: $out"
    v=VARLOG_TOPIC_${tpid}_LOG_STREAMS
    printf -v "$v" '%s' "${!v:+${!v},}$lsid"
    [[ $tpid == "$VARLOG_TOPIC_ID" ]] && VARLOG_LOG_STREAMS=${!v}
    save_env
    echo "$lsid"
}

# Starts varlogadm against the MRs, with --auto-unseal when $1 is 1, and waits until it listens.
start_admin() {
    local adm_args=() k
    for ((k = 1; k <= MRS; k++)); do adm_args+=(--mr "${mr_addrs[k - 1]}"); done
    (($1)) && adm_args+=(--auto-unseal)
    launch "$LOGS/admin.log" "$VARLOG_BIN/varlogadm" start --cluster-id "$VARLOG_CLUSTER_ID" \
        --replication-factor "$RF" --listen "$VARLOG_ADMIN_ADDR" "${adm_args[@]}" --logtostderr
    VARLOG_ADMIN_PID=$STARTED_PID
    save_env
    wait_port "$VARLOG_ADMIN_PID" "${VARLOG_ADMIN_ADDR##*:}" varlogadm "$LOGS/admin.log"
}

# Adds n log streams to topic $1, up to --ls-parallel calls at once, and records them in
# cluster.env in increasing id order (calls finish in any order).
add_log_streams() {
    local tpid=$1 n=$2 i t0 out lsid ids=() failed=() v done_pid
    local dir=$LOGS/logstream-add.$tpid
    local -A running=()
    ((n > 0)) || return 0
    mkdir -p "$dir"
    t0=$(now_ms)
    # Only these calls are waited for: the nodes and the supervisor are children too.
    for ((i = 0; i < n; i++)); do
        (
            rc=0
            ctl logstream add --tpid "$tpid" --timeout 120s >"$dir/$i.out" 2>&1 || rc=$?
            echo "$rc" >"$dir/$i.rc"
        ) &
        running[$!]=1
        if ((${#running[@]} >= LS_PARALLEL)); then
            wait -n -p done_pid "${!running[@]}" || true
            unset "running[$done_pid]"
        fi
    done
    ((${#running[@]} == 0)) || wait "${!running[@]}" || true
    for ((i = 0; i < n; i++)); do
        out=$(cat "$dir/$i.out" 2>/dev/null || true)
        lsid=$(json_int logStreamId <<<"$out" || true)
        if [[ $(cat "$dir/$i.rc" 2>/dev/null) != 0 || -z $lsid ]]; then
            failed+=("$i: $(tail -n 3 <<<"$out" | tr '\n' ' ')")
            continue
        fi
        echo "$out" >>"$LOGS/start.log"
        ids+=("$lsid")
    done
    rm -rf "$dir"
    if ((${#failed[@]})); then
        tail_log "$LOGS/admin.log"
        die "logstream add to topic $tpid: ${#failed[@]} of $n failed; first: ${failed[0]}"
    fi
    v=VARLOG_TOPIC_${tpid}_LOG_STREAMS
    printf -v "$v" '%s' "$({
        [[ -z ${!v} ]] || tr , '\n' <<<"${!v}"
        printf '%s\n' "${ids[@]}"
    } | sort -n | paste -sd, -)"
    [[ $tpid == "$VARLOG_TOPIC_ID" ]] && VARLOG_LOG_STREAMS=${!v}
    save_env
    local ms=$(($(now_ms) - t0))
    say "topic $tpid: $n log streams added in $((ms / 1000)).$((ms % 1000 / 100)) s ($LS_PARALLEL at a time)"
}

all_pids() {
    local k v
    for ((k = 1; k <= ${VARLOG_SN_COUNT:-0}; k++)); do
        v=VARLOG_SN_${k}_PID
        echo "${!v:-0}"
    done
    echo "${VARLOG_ADMIN_PID:-0}"
    for ((k = 1; k <= ${VARLOG_MR_COUNT:-0}; k++)); do
        v=VARLOG_MR_${k}_PID
        echo "${!v:-0}"
    done
}

cmd_stop() {
    if [[ ! -f $ENV_FILE ]]; then
        say "no cluster in $DIR (nothing to stop)"
        return 0
    fi
    load_env
    if ((!FROM_SUPERVISOR)) && [[ ${VARLOG_SUPERVISOR_PID:-0} != 0 ]]; then
        kill "$VARLOG_SUPERVISOR_PID" 2>/dev/null || true
    fi
    local pids=() p left=()
    for p in $(all_pids); do
        if ours "$p"; then
            pids+=("$p")
            kill -TERM "$p" 2>/dev/null || true
        fi
    done
    if ! wait_gone "${pids[*]}" $((TERM_TIMEOUT * 1000)); then
        for p in "${pids[@]}"; do ours "$p" && left+=("$p"); done
        say "SIGKILL to ${left[*]} (still running ${TERM_TIMEOUT} s after SIGTERM)"
        kill -KILL "${left[@]}" 2>/dev/null || true
        wait_gone "${left[*]}" 5000 || die "processes ${left[*]} survived SIGKILL"
    fi
    rm -rf "$DATA"
    mv -f "$ENV_FILE" "$ENV_FILE.stopped"
    say "stopped the cluster in $DIR (${#pids[@]} processes)"
}

node_index() {
    local n=${POS[0]:-} max=$1
    [[ $n =~ ^[0-9]+$ ]] && ((n >= 1 && n <= max)) || die "$CMD wants a node number 1..$max, not '${n}'"
    echo "$n"
}

kill9() {
    local v=$1 pid=${!1}
    if ours "$pid"; then
        kill -KILL "$pid"
        wait_gone "$pid" 5000 || die "PID $pid survived SIGKILL"
    fi
    printf -v "$v" 0
    save_env
}

cmd_logs() {
    local f
    for f in "$LOGS"/mr*.log "$LOGS"/admin.log "$LOGS"/sn*.log "$LOGS"/supervisor.log "$LOGS"/start.log; do
        tail_log "$f"
    done
}

cmd_status() {
    load_env
    cat "$ENV_FILE"
    local p
    for p in $(all_pids); do
        if ours "$p"; then echo "# $p alive"; elif [[ $p != 0 ]]; then echo "# $p gone"; fi
    done
}

topic_or_default() { echo "${TOPIC:-$VARLOG_TOPIC_ID}"; }

# ---- waiting for the unseal after restart-sn ---------------------------------------------------
# varlogctl prints compact JSON and leaves out fields at their zero value: a log stream or a
# replica without "status" is RUNNING. Log stream ids are unique across topics.

# Prints "TPID:LSID" for every log stream (of every topic) with a replica on storage node id $1.
node_log_streams() {
    local snid=$1 t out obj
    for t in ${VARLOG_TOPIC_IDS//,/ }; do
        out=$(ctl logstream get --tpid "$t" --timeout 10s 2>&1) || return 1
        while read -r obj; do
            if [[ $obj == *"\"storageNodeId\":$snid,"* || $obj == *"\"storageNodeId\":$snid}"* ]]; then
                echo "$t:$(json_int logStreamId <<<"$obj")"
            fi
        done < <(grep -o '{"topicId":[^]]*]' <<<"$out")
    done
}

json_status() { grep -o '"status":"[a-z_]*"' | head -n1 | cut -d'"' -f4; }

# Sets LS_STATE to what the admin says of log stream $2 (topic $1): "MR <status>, node <K>
# <status>", and returns 0 when both are running. $3 is node K's `storagenode get` output, $4 K.
ls_state() {
    local t=$1 l=$2 sn_out=$3 k=$4 out obj mr rep
    out=$(ctl logstream get --tpid "$t" --lsid "$l" --timeout 5s 2>&1) || {
        LS_STATE="logstream get failed: $out"
        return 1
    }
    obj=$(grep -o '{"topicId":[^]]*]' <<<"$out" | head -n1)
    mr=$(json_status <<<"$obj")
    rep=$(grep -o "\"logStreamId\":$l,[^,]*" <<<"$sn_out" | head -n1)
    if [[ -z $rep ]]; then
        rep="no replica reported"
    else
        rep=$(json_status <<<"$rep")
    fi
    LS_STATE="MR ${mr:-running}, node $k ${rep:-running}"
    [[ -z $mr && -z $rep ]]
}

# After restart-sn K: returns once every log stream with a replica on node K takes appends
# again (see --help), within $VARLOG_RESTART_SN_WAIT seconds.
wait_unsealed() {
    local k=$1 t0=$2 wait_s=${VARLOG_RESTART_SN_WAIT:-60} id_v=VARLOG_SN_${1}_ID pid_v=VARLOG_SN_${1}_PID
    int_opt VARLOG_RESTART_SN_WAIT "$wait_s"
    ((wait_s > 0 && !NO_WAIT)) || return 0
    local deadline=$((t0 + wait_s * 1000)) lss=() pending how out start_ms tl t l ms next_say=0
    local -A unsealed=() why=()
    while :; do
        if ((${#lss[@]} == 0)) && out=$(node_log_streams "${!id_v}"); then
            [[ -n $out ]] || {
                say "storage node $k has no log stream replica: nothing to unseal"
                return 0
            }
            mapfile -t lss <<<"$out"
            how="by varlogadm --auto-unseal"
            ((VARLOG_AUTO_UNSEAL)) || how="through varlogctl logstream unseal"
            say "storage node $k restarted; waiting up to $wait_s s for log stream(s) $(printf '%s ' "${lss[@]#*:}")to be unsealed $how"
        fi
        pending=()
        if ((${#lss[@]})) && ((VARLOG_AUTO_UNSEAL)); then
            # The admin's view of node K is refreshed every second; one from before the
            # restart (an older startTime) says nothing of the new process.
            out=$(ctl storagenode get --snid "${!id_v}" --timeout 5s 2>&1) || out=
            start_ms=$(grep -o '"startTime":"[^"]*"' <<<"$out" | cut -d'"' -f4)
            start_ms=$(date -d "${start_ms:-@0}" +%s%3N 2>/dev/null) || start_ms=0
            for tl in "${lss[@]}"; do
                t=${tl%:*} l=${tl#*:}
                if ((start_ms < t0)); then
                    why[$l]="node $k not yet seen by the admin since the restart"
                    pending+=("$l")
                elif ! ls_state "$t" "$l" "$out" "$k"; then
                    why[$l]=$LS_STATE
                    pending+=("$l")
                fi
            done
        elif ((${#lss[@]})); then
            for tl in "${lss[@]}"; do
                t=${tl%:*} l=${tl#*:}
                [[ -n ${unsealed[$l]:-} ]] && continue
                if out=$(ctl logstream unseal --tpid "$t" --lsid "$l" --timeout 10s 2>&1); then
                    unsealed[$l]=1
                    continue
                fi
                why[$l]=$(tr '\n' ' ' <<<"$out")
                pending+=("$l")
                # A replica restarted comes back SEALING; the admin seals it again (bringing
                # it up to date) at its next report, every 5 s; this does it now.
                [[ $out == *"invalid state"* ]] &&
                    ctl logstream seal --tpid "$t" --lsid "$l" --timeout 10s >/dev/null 2>&1
            done
        else
            pending=("(list of log streams)")
            why["(list of log streams)"]="varlogctl logstream get failed: $(ctl logstream get --tpid "${VARLOG_TOPIC_ID}" --timeout 5s 2>&1 | tail -n1)"
        fi
        if ((${#pending[@]} == 0)); then
            ms=$(($(now_ms) - t0))
            say "storage node $k: log stream(s) $(printf '%s ' "${lss[@]#*:}")unsealed $((ms / 1000)).$((ms % 1000 / 100)) s after the restart began"
            return 0
        fi
        ours "${!pid_v}" || {
            tail_log "$LOGS/sn$k.log"
            die "storage node $k exited while waiting for the unseal of its log streams"
        }
        if (($(now_ms) >= deadline)); then
            for l in "${pending[@]}"; do say "  log stream $l: ${why[$l]}"; done
            tail_log "$LOGS/admin.log"
            die "storage node $k: log stream(s) ${pending[*]} not unsealed within $wait_s s of the restart (VARLOG_RESTART_SN_WAIT)"
        fi
        if (($(now_ms) >= next_say)); then
            ((next_say == 0)) || for l in "${pending[@]}"; do say "  still waiting for log stream $l: ${why[$l]}"; done
            next_say=$(($(now_ms) + 10000))
        fi
        sleep 1
    done
}

case $CMD in
bin)
    find_bin
    echo "$BIN"
    ;;
start) cmd_start ;;
stop) cmd_stop ;;
_supervise) supervise ;;
kill-sn)
    load_env
    k=$(node_index "$VARLOG_SN_COUNT")
    kill9 "VARLOG_SN_${k}_PID"
    ;;
restart-sn)
    load_env
    k=$(node_index "$VARLOG_SN_COUNT")
    v=VARLOG_SN_${k}_PID
    ! ours "${!v}" || die "storage node $k still runs (PID ${!v})"
    t0=$(now_ms)
    start_sn "$k"
    wait_unsealed "$k" "$t0"
    ;;
kill-mr)
    load_env
    k=$(node_index "$VARLOG_MR_COUNT")
    kill9 "VARLOG_MR_${k}_PID"
    ;;
restart-mr)
    load_env
    k=$(node_index "$VARLOG_MR_COUNT")
    v=VARLOG_MR_${k}_PID
    ! ours "${!v}" || die "MR node $k still runs (PID ${!v})"
    j=VARLOG_MR_${k}_JOIN
    start_mr "$k" "${!j:-0}"
    ;;
add-ls)
    load_env
    add_log_stream "$(topic_or_default)"
    ;;
seal | unseal)
    load_env
    [[ ${POS[0]:-} =~ ^[0-9]+$ ]] || die "$CMD wants a log stream id"
    ctl logstream "$CMD" --tpid "$(topic_or_default)" --lsid "${POS[0]}" --timeout 60s
    ;;
ctl)
    load_env
    ctl "${POS[@]}"
    ;;
logs) cmd_logs ;;
status) cmd_status ;;
*) die "unknown command '$CMD' (see --help)" ;;
esac
