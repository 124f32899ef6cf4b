#!/bin/bash
# Runs README's test set (`make test`: ctest -LE 'memcheck|cluster|soak|prometheus') at both
# ends of speed, several rounds in each condition, and prints one table: a suite that
# waits for events instead of times passes in every row (docs/RELIABILITY.md, "A suite that
# holds at any speed"). Uses an existing build tree; build it first (make build).
#
#   scripts/speed-matrix.sh                          # every condition, 3 rounds each
#   scripts/speed-matrix.sh -c 'quiet pinned' -r 5
#   scripts/speed-matrix.sh -c memcheck -r 2 -R appender
#
# Conditions (-c, a space-separated list; default all five):
#   quiet     nothing else started: ctest -j NPROC
#   pinned    the whole run pinned to CPU 0 (taskset -c 0): every test and its servers share
#             one CPU
#   hogs      beside 2 busy loops (scripts/stress-suite.sh's -H hogs) at the same priority
#   niced     nice -n 19 beside 4 busy loops at priority 0 started in a session of their own
#             (setsid), as another terminal's work: with autogroup scheduling (Debian's
#             default, /proc/sys/kernel/sched_autogroup_enabled) a session's nice ranks its
#             processes only among themselves, so the two sessions share the CPUs. In one
#             session nice 19 against 4 busy loops leaves the suite under 1 % of a CPU, about
#             a 100x slowdown, which no time-bounded suite is built for (valgrind is 20-50x,
#             and its copies get longer bounds)
#   memcheck  the valgrind copies (ctest -L memcheck), as `make memcheck` runs them
# Options:
#   -r N        rounds per condition (default 3)
#   -R REGEX    only the tests matching REGEX (ctest -R)
#   -E REGEX    not the tests matching REGEX (ctest -E)
#   -B DIR      build tree (default build)
#   -o DIR      where each run's ctest log goes (default: a new directory under ${TMPDIR:-/tmp})
# Exits non-zero when any run failed; the table lists each failed test by name.
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
conditions="quiet pinned hogs niced memcheck"
rounds=3
regex=
exclude=
build="$root/build"
out=

usage() {
    sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    exit "${1:-2}"
}

while getopts "c:r:R:E:B:o:h" opt; do
    case $opt in
    c) conditions=$OPTARG ;;
    r) rounds=$OPTARG ;;
    R) regex=$OPTARG ;;
    E) exclude=$OPTARG ;;
    B) build=$(cd "$OPTARG" && pwd) ;;
    o) out=$OPTARG ;;
    h) usage 0 ;;
    *) usage ;;
    esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "speed-matrix: -r wants a positive number: $rounds" >&2; usage; }
[ -f "$build/CTestTestfile.cmake" ] || { echo "speed-matrix: no build tree at $build (run make build)" >&2; exit 2; }
for c in $conditions; do
    case $c in quiet | pinned | hogs | niced | memcheck) ;; *) echo "speed-matrix: unknown condition: $c" >&2; usage ;; esac
done
out=${out:-$(mktemp -d "${TMPDIR:-/tmp}/speed-matrix.XXXXXX")}
mkdir -p "$out"

declare -a hog_pids=()
stop_hogs() {
    for pid in "${hog_pids[@]}"; do
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    hog_pids=()
}
trap stop_hogs EXIT
start_hogs() { # N [setsid]
    for ((h = 0; h < $1; h++)); do
        ${2:-} bash -c 'while :; do :; done' &
        hog_pids+=($!)
    done
}

jobs=$(nproc 2>/dev/null || echo 2)
filter=()
[ -n "$regex" ] && filter+=(-R "$regex")
[ -n "$exclude" ] && filter+=(-E "$exclude")
declare -a rows=()
status=0
for c in $conditions; do
    labels=(-LE 'memcheck|cluster|soak|prometheus')
    prefix=()
    case $c in
    pinned) prefix=(taskset -c 0) ;;
    hogs) start_hogs 2 ;;
    niced)
        start_hogs 4 setsid
        prefix=(nice -n 19)
        ;;
    memcheck) labels=(-L memcheck) ;;
    esac
    passed=0 failed_names=""
    for ((r = 1; r <= rounds; r++)); do
        log="$out/$c-$r.log"
        t0=$(date +%s)
        (cd "$build" && "${prefix[@]}" ctest --output-on-failure --timeout 600 -j "$jobs" \
            "${labels[@]}" "${filter[@]}") >"$log" 2>&1
        rc=$?
        took=$(($(date +%s) - t0))
        summary=$(grep -E '^[0-9]+% tests passed' "$log" | tail -n 1)
        echo "speed-matrix: $c round $r: ${summary:-no summary (exit $rc)} in ${took}s ($log)"
        if [ "$rc" -eq 0 ]; then
            passed=$((passed + 1))
        else
            status=1
            names=$(sed -En 's/^[[:space:]]*[0-9]+ - ([^ ]+) \(.*/\1/p' "$log" | tr '\n' ' ')
            failed_names+="r$r: ${names:-exit $rc} "
        fi
    done
    stop_hogs
    rows+=("$(printf '| %-8s | %d of %d | %s |' "$c" "$passed" "$rounds" "${failed_names:--}")")
done

echo
echo "== speed matrix ($(date '+%F %T'), $(nproc) CPUs, $(git -C "$root" rev-parse --short HEAD 2>/dev/null))"
echo "| condition | runs green | failed tests |"
echo "|---|---|---|"
printf '%s\n' "${rows[@]}"
exit $status
