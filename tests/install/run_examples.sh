#!/bin/bash
# run_examples.sh SERVER PRODUCER CONSUMER [COUNT]: starts SERVER (an installed
# varlog-server) on a free port, runs PRODUCER then CONSUMER against it with COUNT records,
# and fails unless both succeed and the consumer read every record. The server is stopped
# on every way out.
set -euo pipefail
server=$1 producer=$2 consumer=$3 count=${4:-1000}

dir=$(mktemp -d)
pid=
cleanup() {
    if [ -n "$pid" ]; then
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$dir"
}
trap cleanup EXIT

# The server prints its address as its first line: read it through a FIFO, which blocks
# until the line is there (bounded by read -t) instead of polling a file.
mkfifo "$dir/out"
"$server" --listen 127.0.0.1:0 --topics 1 --log-streams 2 >"$dir/out" &
pid=$!
exec 3<"$dir/out"
if ! read -r -t 30 addr <&3; then
    echo "run_examples: $server printed no address within 30 s" >&2
    exit 1
fi
echo "varlog-server at $addr"

timeout 120 "$producer" "$addr" 1 "$count"
out=$(timeout 120 "$consumer" "$addr" 1 "$count")
echo "$out"
if ! grep -q "^consumer: $count entries of topic 1" <<<"$out"; then
    echo "run_examples: the consumer did not read $count entries" >&2
    exit 1
fi
