#!/bin/sh
# Runs every libFuzzer harness of a fuzz build (make fuzz-smoke, make fuzz) for SECONDS each,
# starting from its committed seeds (tests/fuzz/corpus/<harness>, left untouched) plus the
# corpus earlier runs grew in BUILD/fuzz-corpus/<harness>. Crashes, leaks, timeouts and
# out-of-memory inputs land in BUILD/fuzz-artifacts/<harness>/ and fail the run; each
# harness's final line (executions, exec/s, cov:, ft:) is printed.
#
#   scripts/fuzz.sh [-b BUILD] [-t SECONDS] [-j JOBS] [HARNESS...]
set -eu

BUILD=build-fuzz
SECONDS_EACH=60
JOBS=1
while getopts b:t:j:h opt; do
    case $opt in
    b) BUILD=$OPTARG ;;
    t) SECONDS_EACH=$OPTARG ;;
    j) JOBS=$OPTARG ;;
    *)
        sed -n '2,9p' "$0"
        exit 2
        ;;
    esac
done
shift $((OPTIND - 1))

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$BUILD/tests/fuzz
if [ $# -eq 0 ]; then
    set -- $(cd "$ROOT/tests/fuzz/corpus" && ls)
fi

run_one() {
    h=$1
    if [ ! -x "$BIN/$h" ]; then
        echo "fuzz: $BIN/$h is missing (build the target varlog_fuzzers)" >&2
        return 1
    fi
    work=$BUILD/fuzz-corpus/$h
    art=$BUILD/fuzz-artifacts/$h
    log=$BUILD/fuzz-logs/$h.log
    mkdir -p "$work" "$art" "$(dirname "$log")"
    # -timeout: an input that runs 25 s is a hang; nice: other work shares the machine.
    if nice "$BIN/$h" -max_total_time="$SECONDS_EACH" -timeout=25 -print_final_stats=1 \
        -artifact_prefix="$art/" "$work" "$ROOT/tests/fuzz/corpus/$h" >"$log" 2>&1; then
        last=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -n 1)
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        echo "fuzz: $h ok: $execs executions in ${SECONDS_EACH} s; $last"
    else
        echo "fuzz: $h FAILED; inputs in $art/, its log $log:" >&2
        grep -E 'ERROR|SUMMARY|check failed|runtime error|Test unit written' "$log" | head -20 >&2
        return 1
    fi
}

status=0
if [ "$JOBS" -le 1 ]; then
    for h in "$@"; do
        run_one "$h" || status=1
    done
else
    # Two at a time on a 2-core machine; each job's result comes back through its exit code.
    pids=""
    for h in "$@"; do
        run_one "$h" &
        pids="$pids $!"
        # Waits for a free slot: counts the jobs still alive (jobs -p in a $(...) subshell
        # sees none of them).
        while :; do
            alive=0
            for p in $pids; do
                if kill -0 "$p" 2>/dev/null; then alive=$((alive + 1)); fi
            done
            [ "$alive" -lt "$JOBS" ] && break
            sleep 1
        done
    done
    for p in $pids; do
        wait "$p" || status=1
    done
fi
exit $status
