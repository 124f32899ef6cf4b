#!/bin/sh
# The CTest entries of the Python binding (python_pytest, label python; python_cluster,
# label cluster): builds varlog._varlog against the
# CMake build tree BUILD (its libvarlog and libvarlog_server, an rpath to them) into
# BUILD/python/lib, never into the source tree, then runs the pytest suite with it.
#   python/run-tests.sh BUILD [SANITIZER] [pytest args...]
# Exit 77 (CTest: skipped, with one line saying why) when Debian's python3-dev or
# python3-pytest is missing (`make deps` installs them) or under a sanitizer build, whose
# runtime would have to be preloaded into the interpreter; under CI=true these fail instead.
# pytest's exit 5 (no tests collected) fails: a suite that ran nothing is not a pass.
set -u
BUILD=$(cd "$1" && pwd)
SANITIZE=${2:-}
if [ $# -ge 2 ]; then shift 2; else shift $#; fi
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${VARLOG_PYTHON:-/usr/bin/python3}

skip() {
    echo "python tests skipped: $*"
    if [ "${CI:-}" = "true" ]; then
        echo "(failing instead: CI=true)"
        exit 1
    fi
    exit 77
}

if [ -n "$SANITIZE" ]; then
    # by design, not a missing dependency: skipped under CI=true too
    echo "python tests skipped: a VARLOG_SANITIZE=$SANITIZE build: python3 would need the sanitizer runtime preloaded; run them in a build without it"
    exit 77
fi
[ -x "$PY" ] || skip "$PY not found (apt-get install python3)"
"$PY" -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' ||
    skip "Python.h not found for $PY: apt-get install python3-dev (make deps)"
"$PY" -c 'import pytest' 2>/dev/null || skip "pytest not found for $PY: apt-get install python3-pytest (make deps)"
"$PY" -c 'import pytest_timeout' 2>/dev/null ||
    skip "pytest-timeout not found for $PY: apt-get install python3-pytest-timeout (make deps)"

# VARLOG_PY_SUITE=tests_cluster: the real-cluster scenario (CTest python_cluster, label
# cluster), skipped like the C cluster tests where no Varlog binaries exist.
SUITE=${VARLOG_PY_SUITE:-tests}
if [ "$SUITE" = tests_cluster ] && [ -z "${VARLOG_BIN:-}" ] && [ ! -d "$HERE/../../shared/varlog" ]; then
    skip "no Varlog binaries: set VARLOG_BIN or provide ../shared/varlog"
fi

OUT="$BUILD/python"
cd "$HERE" || exit 1
if ! VARLOG_BUILD_DIR="$BUILD" VARLOG_PY_CFLAGS=-Werror "$PY" setup.py -q build \
    --build-base "$OUT/build" --build-lib "$OUT/lib" >"$OUT.build.log" 2>&1; then
    cat "$OUT.build.log"
    echo "python tests: building the extension failed"
    exit 1
fi
cd "$OUT" || exit 1
# Each test is bounded (a hang ran 600 s): past VARLOG_PY_TEST_TIMEOUT seconds (30; the
# slowest test takes 3 s beside busy loops) pytest-timeout fails it with its traceback and the
# suite goes on; should the test not get back to the interpreter (a C call that never returns,
# with or without the GIL), 15 s later conftest.py's faulthandler writes every thread's stack
# to fd 3 (stderr, which pytest does not capture there) and ends the run.
PY_TIMEOUT=${VARLOG_PY_TEST_TIMEOUT:-30}
PYTHONPATH="$OUT/lib" VARLOG_PY_TEST_TIMEOUT="$PY_TIMEOUT" VARLOG_PY_HANG_FD=3 \
    "$PY" -m pytest -q -p no:cacheprovider --timeout="$PY_TIMEOUT" --timeout-method=signal \
    --rootdir "$HERE" "$HERE/$SUITE" "$@" 3>&2
rc=$?
if [ $rc -eq 5 ]; then
    echo "python tests: pytest collected no tests (exit 5): failing"
    exit 1
fi
exit $rc
