#!/bin/bash
# run_examples.sh SERVER PRODUCER CONSUMER [COUNT [HELLO_APPEND HELLO_READ]]: starts SERVER
# (an installed varlog-server) on a free port, runs PRODUCER then CONSUMER against it with
# COUNT records, and fails unless both succeed and the consumer read every record; then
# README's first programs, HELLO_APPEND and HELLO_READ, which must store and read back one
# record after those. The server is stopped on every way out.
set -euo pipefail
server=$1 producer=$2 consumer=$3 count=${4:-1000} hello_append=${5:-} hello_read=${6:-}

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
if [ -n "$hello_append" ]; then
    out=$(timeout 60 "$hello_append" "$addr" "hello, varlog")
    echo "$out"
    [ "$out" = "stored at GLSN $((count + 1))" ] || { echo "run_examples: hello_append said '$out'" >&2; exit 1; }
    out=$(timeout 60 "$hello_read" "$addr")
    lines=$(wc -l <<<"$out")
    last=$(tail -n 1 <<<"$out")
    echo "hello_read: $lines lines, the last: $last"
    if [ "$lines" -ne $((count + 1)) ] || [ "$last" != "GLSN $((count + 1)): hello, varlog" ]; then
        echo "run_examples: hello_read did not read the $((count + 1)) entries" >&2
        exit 1
    fi
fi

# A dead cluster (issue 19): the server killed under a producer of 3,000,000 records. The
# producer must give up by itself, every call it queued settled (its summary counts them),
# well within appender.delivery.timeout.ms (30 s) after the kill.
kill "$pid"
wait "$pid" 2>/dev/null || true
pid=
rm -f "$dir/out"
mkfifo "$dir/out"
"$server" --listen 127.0.0.1:0 --topics 1 --log-streams 2 >"$dir/out" &
pid=$!
exec 3<"$dir/out"
if ! read -r -t 30 addr <&3; then
    echo "run_examples: $server printed no address within 30 s" >&2
    exit 1
fi
"$producer" "$addr" 1 3000000 >"$dir/dead.out" 2>"$dir/dead.err" &
ppid=$!
sleep 0.5 # the scenario: the server dies half a second into the run
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
pid=
killed=$(date +%s%N)
rc=0
# Bounded: a producer still running 40 s after the kill fails the test.
timeout 40 tail --pid="$ppid" -f /dev/null || { kill -KILL "$ppid"; echo "run_examples: the producer did not end within 40 s of the server's death" >&2; exit 1; }
wait "$ppid" || rc=$?
took_ms=$((($(date +%s%N) - killed) / 1000000))
cat "$dir/dead.out"
head -c 2000 "$dir/dead.err"
echo "producer ended ${took_ms} ms after the server was killed, exit status $rc"
if [ "$rc" -ne 1 ] || ! grep -q "^producer: .* records stored" "$dir/dead.out"; then
    echo "run_examples: after the server's death the producer should report and exit 1" >&2
    exit 1
fi
