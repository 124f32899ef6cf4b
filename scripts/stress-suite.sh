#!/bin/bash
# Runs the test suite under load, to show it stays green on a busy machine (issue 8, point 15):
# the ThreadSanitizer suite several copies at once and the valgrind (memcheck) suite several
# copies at once, for several rounds. Each copy runs in its own directory (a copy of the build
# tree's CTestTestfile.cmake files, so the tests' working directory and CTest's Testing/ logs
# are its own) with its own ctest output. Exits non-zero if any test failed in any copy, and
# prints a summary: rounds, copies, and every failure with its test name.
#
#   scripts/stress-suite.sh                      # 5 rounds: TSan x4, then valgrind x2
#   scripts/stress-suite.sh -s tsan -r 5 -t 4 -R 'test_server_log_io|test_rpc_server'
#   scripts/stress-suite.sh -s valgrind -v 2 -r 1 -R server
#   scripts/stress-suite.sh -s memcheck-asan -H 2 -v 1 -a 1 -r 5   # issue 19: beside a CPU hog
#
# Options:
#   -s SUITES               tsan, valgrind, asan, both (tsan and valgrind), memcheck-asan
#                           (valgrind and asan) or all (default both)
#   -r N                    rounds per suite (default 5)
#   -t N                    TSan copies at once (default 4)
#   -v N                    valgrind copies at once (default 2)
#   -a N                    ASan copies at once (default 2)
#   -H N                    N busy-looping processes beside the suites for the whole run, a
#                           CPU hog standing for other work on the machine (default 0)
#   -A DIR                  ASan build directory (default build-stress-asan)
#   -R REGEX / -E REGEX     only / not the tests matching REGEX (ctest -R / -E; valgrind copies
#                           are named NAME_memcheck, so -R NAME selects them too)
#   -T DIR                  TSan build directory (default build-stress-tsan)
#   -N DIR                  normal build directory, for valgrind (default build-stress)
#   -n                      do not configure or build: reuse the build directories as they are
#   -j N                    build jobs (default 2)
#   -o DIR                  where the copies' directories and logs go (default: a new
#                           directory under ${TMPDIR:-/tmp})
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
suites=both
rounds=5
tsan_copies=4
vg_copies=2
asan_copies=2
hogs=0
asan_dir="build-stress-asan"
regex=
exclude=
tsan_dir="build-stress-tsan"
normal_dir="build-stress"
build=1
jobs=2
out=

usage() {
    sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    exit "${1:-2}"
}

while getopts "s:r:t:v:a:H:A:R:E:T:N:nj:o:h" opt; do
    case $opt in
    s) suites=$OPTARG ;;
    r) rounds=$OPTARG ;;
    t) tsan_copies=$OPTARG ;;
    v) vg_copies=$OPTARG ;;
    a) asan_copies=$OPTARG ;;
    H) hogs=$OPTARG ;;
    A) asan_dir=$OPTARG ;;
    R) regex=$OPTARG ;;
    E) exclude=$OPTARG ;;
    T) tsan_dir=$OPTARG ;;
    N) normal_dir=$OPTARG ;;
    n) build=0 ;;
    j) jobs=$OPTARG ;;
    o) out=$OPTARG ;;
    h) usage 0 ;;
    *) usage ;;
    esac
done
case $suites in
tsan) want="tsan" ;;
valgrind) want="valgrind" ;;
asan) want="asan" ;;
both) want="tsan valgrind" ;;
memcheck-asan) want="valgrind asan" ;;
all) want="tsan valgrind asan" ;;
*) usage ;;
esac
wants() { [[ " $want " == *" $1 "* ]]; }
for n in "$rounds" "$tsan_copies" "$vg_copies" "$asan_copies" "$jobs"; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "stress-suite: not a positive number: $n" >&2; usage; }
done
[[ $hogs =~ ^[0-9]+$ ]] || { echo "stress-suite: not a number: $hogs" >&2; usage; }
[[ $tsan_dir = /* ]] || tsan_dir=$root/$tsan_dir
[[ $asan_dir = /* ]] || asan_dir=$root/$asan_dir
[[ $normal_dir = /* ]] || normal_dir=$root/$normal_dir
if [[ -z $out ]]; then
    out=$(mktemp -d "${TMPDIR:-/tmp}/varlog-stress.XXXXXX")
else
    mkdir -p "$out"
fi

# Copies and hogs still running when the script ends are stopped by process id.
declare -a running=()
declare -a hog_pids=()
stop_hogs() {
    for pid in "${hog_pids[@]}"; do
        kill "$pid" 2>/dev/null
    done
    hog_pids=()
}
stop_copies() {
    for pid in "${running[@]}"; do
        kill "$pid" 2>/dev/null
    done
    stop_hogs
    exit 130
}
trap stop_copies INT TERM
trap stop_hogs EXIT

build_tree() { # dir cmake-args...
    local dir=$1
    shift
    if [[ $build -eq 0 ]]; then
        [[ -f $dir/CTestTestfile.cmake ]] || {
            echo "stress-suite: $dir is not a built tree (run without -n)" >&2
            exit 2
        }
        return
    fi
    echo "== building $dir"
    local log
    log=$out/build-$(basename "$dir").log
    if ! cmake -S "$root" -B "$dir" "$@" >"$log" 2>&1 ||
        ! cmake --build "$dir" -j "$jobs" >>"$log" 2>&1; then
        echo "stress-suite: building $dir failed; see $log" >&2
        tail -20 "$log" >&2
        exit 2
    fi
}

# A directory holding a copy of the tree's CTestTestfile.cmake files: the tests' binaries are
# named by absolute path there, and CTest runs each test in the directory of its file.
make_copy_dir() { # build-dir copy-dir
    local f
    mkdir -p "$2"
    (cd "$1" && find . -name CTestTestfile.cmake) | while read -r f; do
        mkdir -p "$2/$(dirname "$f")"
        cp "$1/$f" "$2/$f"
    done
}

declare -a summary=()
failures=0

# Runs one suite: rounds x copies of ctest with the given label selection.
run_suite() { # name build-dir copies label-args...
    local name=$1 dir=$2 copies=$3
    shift 3
    local -a sel=("$@")
    [[ -n $regex ]] && sel+=(-R "$regex")
    [[ -n $exclude ]] && sel+=(-E "$exclude")
    local ntests
    ntests=$(cd "$dir" && ctest -N "${sel[@]}" | sed -n 's/^Total Tests: //p')
    if [[ -z $ntests || $ntests -eq 0 ]]; then
        echo "stress-suite: no $name tests selected in $dir" >&2
        summary+=("$name: no tests selected")
        failures=$((failures + 1))
        return
    fi
    local suite_fail=0 r c
    local -a fail_lines=()
    for ((r = 1; r <= rounds; r++)); do
        local t0=$SECONDS
        running=()
        for ((c = 1; c <= copies; c++)); do
            local cd_=$out/$name/round$r/copy$c
            make_copy_dir "$dir" "$cd_"
            (cd "$cd_" && exec ctest --output-on-failure "${sel[@]}" \
                --output-log "$cd_/ctest-output.log" >"$cd_/ctest.txt" 2>&1) &
            running+=($!)
        done
        local -a rcs=()
        for pid in "${running[@]}"; do
            wait "$pid"
            rcs+=($?)
        done
        running=()
        local line="$name round $r/$rounds: $copies copies x $ntests tests in $((SECONDS - t0)) s:"
        local bad=0
        for ((c = 1; c <= copies; c++)); do
            local cd_=$out/$name/round$r/copy$c
            # CTest lists failed tests as "<tab> 12 - name (Failed)" after this line.
            local failed
            failed=$(sed -n '/The following tests FAILED:/,$p' "$cd_/ctest.txt" |
                sed -n 's/^[[:space:]]*[0-9]* - \(.*\)$/\1/p' | paste -sd ';' -)
            if [[ ${rcs[c - 1]} -ne 0 || -n $failed ]]; then
                bad=$((bad + 1))
                [[ -n $failed ]] || failed="ctest exit ${rcs[c - 1]}"
                fail_lines+=("  FAIL round $r copy $c: $failed  ($cd_/ctest.txt)")
            fi
        done
        if [[ $bad -eq 0 ]]; then
            echo "$line all passed"
        else
            echo "$line $bad copies failed"
            suite_fail=$((suite_fail + bad))
        fi
    done
    summary+=("$name: $rounds rounds x $copies copies x $ntests tests: $suite_fail failed copies")
    summary+=("${fail_lines[@]}")
    failures=$((failures + suite_fail))
}

echo "stress-suite: output in $out"
wants tsan && build_tree "$tsan_dir" -DCMAKE_BUILD_TYPE=Debug -DVARLOG_SANITIZE=thread
wants valgrind && build_tree "$normal_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo
wants asan && build_tree "$asan_dir" -DCMAKE_BUILD_TYPE=Debug -DVARLOG_SANITIZE=address
for ((h = 0; h < hogs; h++)); do
    (while :; do :; done) &
    hog_pids+=($!)
done
[[ $hogs -gt 0 ]] && echo "stress-suite: $hogs CPU hogs running beside the suites"
# The cluster and soak suites are not what this measures (and need their own setup).
if wants tsan; then
    run_suite tsan "$tsan_dir" "$tsan_copies" -LE 'memcheck|cluster|soak'
fi
if wants valgrind; then
    command -v valgrind >/dev/null || {
        echo "stress-suite: valgrind not installed" >&2
        exit 2
    }
    run_suite valgrind "$normal_dir" "$vg_copies" -L memcheck
fi
if wants asan; then
    run_suite asan "$asan_dir" "$asan_copies" -LE 'memcheck|cluster|soak'
fi
stop_hogs

{
    echo "== summary ($(date '+%F %T'), $(nproc) CPUs, $hogs CPU hogs)"
    printf '%s\n' "${summary[@]}"
    if [[ $failures -eq 0 ]]; then
        echo "no failures"
    else
        echo "$failures failed copies"
    fi
} | tee "$out/summary.txt"
[[ $failures -eq 0 ]]
