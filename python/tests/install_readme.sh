#!/bin/sh
# CTest python_install (labels python, install): runs python/README.md's install block, the
# one after `<!-- python install: ... -->`, exactly as written except its first line
# `make build` (the build tree under test is that build), in a fresh directory: a copy of
# python/, the headers and BUILD linked in as build/. Then it imports the package from the
# venv the block made, from another directory, and appends and reads back through it.
#   python/tests/install_readme.sh BUILD
# No network: pip and build get a dead proxy, so any download fails at once instead of
# passing here and failing offline. Exit 77 (skipped, saying why) without Debian's
# python3-build, python3-wheel or python3-venv (`make deps`); under CI=true that fails.
set -eu
BUILD=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")/.." && pwd)
REPO=$(dirname "$HERE")
PY=/usr/bin/python3

skip() {
    echo "python install test skipped: $*"
    if [ "${CI:-}" = "true" ]; then
        echo "(failing instead: CI=true)"
        exit 1
    fi
    exit 77
}
"$PY" -c 'import build, wheel, setuptools' 2>/dev/null ||
    skip "Debian's python3-build, python3-wheel or python3-setuptools is missing (make deps)"
"$PY" -c 'import ensurepip, venv' 2>/dev/null || skip "Debian's python3-venv is missing (make deps)"

# the block: the lines between the marker's ```sh and the next ```
BLOCK=$(awk '/^<!-- python install:/ { m = 1; next }
             m == 1 && /^```sh$/ { m = 2; next }
             m == 2 && /^```$/ { exit }
             m == 2 { print }' "$HERE/README.md")
[ -n "$BLOCK" ] || { echo "python/README.md: no \`\`\`sh block after <!-- python install: -->"; exit 1; }
FIRST=$(printf '%s\n' "$BLOCK" | head -n 1)
[ "$FIRST" = "make build" ] || { echo "README's install block does not begin with 'make build': $FIRST"; exit 1; }
REST=$(printf '%s\n' "$BLOCK" | tail -n +2)
VENV=$(printf '%s\n' "$REST" | sed -n 's/.* -m venv \([^ ]*\).*/\1/p')
[ -n "$VENV" ] || { echo "README's install block makes no venv (python3 -m venv PATH)"; exit 1; }

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/varlog-py-install.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
mkdir -p "$SCRATCH/client" "$SCRATCH/server" "$SCRATCH/elsewhere"
# python/ without what builds left in it
(cd "$HERE" && tar cf - --exclude=./build --exclude='./*.egg-info' --exclude='*.so' \
    --exclude=__pycache__ .) | (mkdir "$SCRATCH/python" && cd "$SCRATCH/python" && tar xf -)
ln -s "$REPO/client/include" "$SCRATCH/client/include"
ln -s "$REPO/server/include" "$SCRATCH/server/include"
ln -s "$BUILD" "$SCRATCH/build"
printf '%s\n' "$REST" >"$SCRATCH/install.sh"

echo "python install test: running README's block (without 'make build') in $SCRATCH:"
cat "$SCRATCH/install.sh"
cd "$SCRATCH"
rm -f "$BUILD"/python-dist/varlog-*.whl
# a fresh user's environment: none of this machine's PIP_* settings (find-links, config)
mkdir "$SCRATCH/home"
env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$SCRATCH/home" LANG=C.UTF-8 \
    PIP_CONFIG_FILE=/dev/null http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9 \
    HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 \
    sh -eux install.sh

cd "$SCRATCH/elsewhere"
env -i PATH=/usr/bin:/bin HOME="$SCRATCH/home" LANG=C.UTF-8 \
    "$SCRATCH/$VENV/bin/python" - "$SCRATCH/$VENV" <<'PYEOF'
import os, sys
import varlog

venv = os.path.realpath(sys.argv[1])
where = os.path.realpath(varlog.__file__)
assert where.startswith(venv + os.sep), "varlog imported from %s, not the venv %s" % (where, venv)
with varlog.Server(topics=1, log_streams_per_topic=1) as srv, \
        varlog.Client(srv.address, open_timeout_ms=5000) as c:
    metas = c.append(1, [b"a", b"b"])
    with c.appender(1) as app:
        f = app.append(b"c")
    assert f.result().glsn == 3, f.result()
    got = [e.data for e in c.subscribe(1, 1, 4)]
    assert got == [b"a", b"b", b"c"], got
print("python install test: varlog %s from %s appended and read back %d records"
      % (varlog.version(), where, len(got)))
PYEOF
