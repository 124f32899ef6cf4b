#!/bin/sh
# Installs, with apt-get, the Debian packages libvarlog needs to build and test.
# Idempotent: only missing packages are installed. Works as root, or via sudo.
# --fuzz: also the second list, what the libFuzzer harnesses need (`make fuzz-smoke`,
# `make fuzz`): clang and its sanitizer and libFuzzer runtimes. The normal build needs no clang.
set -eu

# libmicrohttpd-dev: varlog-cli's --metrics-listen and examples/metrics_http.c (never the
# library); prometheus: promtool and a real Prometheus for the tests of the metrics
# exposition (tests/metrics, `make test-prometheus`); python3-dev, python3-setuptools and
# python3-pytest: the Python binding (python/, `make python`) and its tests (label python);
# python3-pytest-timeout: those tests' per-test bound (python/run-tests.sh --timeout);
# python3-venv, python3-wheel and python3-build: python/README.md's install (a wheel built
# offline, installed into a venv) and its test (python_install);
# clang-format: `make check-format`; python3-protobuf: `make check-wire` (Debian's, for
# /usr/bin/python3, which the checker runs whatever python3 comes first on PATH).
PACKAGES="gcc make cmake pkg-config libgrpc-dev libprotobuf-c-dev protobuf-c-compiler \
libcmocka-dev libcjson-dev valgrind python3-protobuf libmicrohttpd-dev prometheus \
python3-dev python3-setuptools python3-pytest python3-pytest-timeout python3-venv \
python3-wheel python3-build clang-format"
FUZZ_PACKAGES="clang libclang-rt-14-dev"

case "${1:-}" in
--fuzz) PACKAGES="$PACKAGES $FUZZ_PACKAGES" ;;
"") ;;
*)
    echo "usage: $0 [--fuzz]" >&2
    exit 2
    ;;
esac

missing=""
for p in $PACKAGES; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$status" in
    *"install ok installed"*) ;;
    *) missing="$missing $p" ;;
    esac
done

if [ -z "$missing" ]; then
    echo "install-deps: all build dependencies are present"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
else
    echo "install-deps: missing packages:$missing" >&2
    echo "install-deps: not root and sudo is not available; install them by hand" >&2
    exit 1
fi

echo "install-deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get update -qq; then
    echo "install-deps: 'apt-get update' failed; check the network and /etc/apt/sources.list" >&2
    exit 1
fi
# shellcheck disable=SC2086
if ! $SUDO apt-get install -y -qq --no-install-recommends $missing; then
    echo "install-deps: 'apt-get install$missing' failed" >&2
    exit 1
fi
echo "install-deps: done"
