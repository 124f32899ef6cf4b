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
#
# Options:
#   -s tsan|valgrind|both   which suites (default both)
#   -r N                    rounds per suite (default 5)
#   -t N                    TSan copies at once (default 4)
#   -v N                    valgrind copies at once (default 2)
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

while getopts "s:r:t:v:R:E:T:N:nj:o:h" opt; do
    case $opt in
    s) suites=$OPTARG ;;
    r) rounds=$OPTARG ;;
    t) tsan_copies=$OPTARG ;;
    v) vg_copies=$OPTARG ;;
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
case $suites in tsan | valgrind | both) ;; *) usage ;; esac
for n in "$rounds" "$tsan_copies" "$vg_copies" "$jobs"; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "stress-suite: not a positive number: $n" >&2; usage; }
done
[[ $tsan_dir = /* ]] || tsan_dir=$root/$tsan_dir
[[ $normal_dir = /* ]] || normal_dir=$root/$normal_dir
if [[ -z $out ]]; then
    out=$(mktemp -d "${TMPDIR:-/tmp}/varlog-stress.XXXXXX")
else
    mkdir -p "$out"
fi

# Copies still running when the script is interrupted are stopped by process id.
declare -a running=()
stop_copies() {
    for pid in "${running[@]}"; do
        kill "$pid" 2>/dev/null
    done
    exit 130
}
trap stop_copies INT TERM

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
if [[ $suites != valgrind ]]; then
    build_tree "$tsan_dir" -DCMAKE_BUILD_TYPE=Debug -DVARLOG_SANITIZE=thread
fi
if [[ $suites != tsan ]]; then
    build_tree "$normal_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
if [[ $suites != valgrind ]]; then
    run_suite tsan "$tsan_dir" "$tsan_copies" -LE memcheck
fi
if [[ $suites != tsan ]]; then
    command -v valgrind >/dev/null || {
        echo "stress-suite: valgrind not installed" >&2
        exit 2
    }
    run_suite valgrind "$normal_dir" "$vg_copies" -L memcheck
fi

{
    echo "== summary ($(date '+%F %T'), $(nproc) CPUs)"
    printf '%s\n' "${summary[@]}"
    if [[ $failures -eq 0 ]]; then
        echo "no failures"
    else
        echo "$failures failed copies"
    fi
} | tee "$out/summary.txt"
[[ $failures -eq 0 ]]
