#!/bin/bash
# run_examples.sh SERVER PRODUCER CONSUMER [COUNT [HELLO_APPEND HELLO_READ [METRICS_HTTP]]]:
# starts SERVER (an installed varlog-server) on a free port, runs PRODUCER then CONSUMER
# against it with COUNT records, and fails unless both succeed and the consumer read every
# record; then README's first programs, HELLO_APPEND and HELLO_READ, which must store and
# read back one record after those; then METRICS_HTTP, whose /metrics must answer as
# Prometheus expects while it appends, and which must store every record it appended. The
# server is stopped on every way out.
set -euo pipefail
server=$1 producer=$2 consumer=$3 count=${4:-1000} hello_append=${5:-} hello_read=${6:-}
metrics_http=${7:-}

dir=$(mktemp -d)
pid=
mpid=
cleanup() {
    for p in $mpid $pid; do
        kill "$p" 2>/dev/null || true
        kill -CONT "$p" 2>/dev/null || true # a producer stopped below
        wait "$p" 2>/dev/null || true
    done
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

if [ -n "$metrics_http" ]; then
    # Appends until told to stop (SECONDS 0), on a free port, which it prints first; GET
    # /metrics over bash's /dev/tcp (no curl needed) until a sent-messages sample is there
    # (bounded: 60 s), then SIGTERM, as Ctrl-C would: it must stop and exit 0.
    mkfifo "$dir/metrics"
    "$metrics_http" "$addr" 0 0 >"$dir/metrics" &
    mpid=$!
    exec 4<"$dir/metrics"
    if ! read -r -t 30 line <&4; then
        echo "run_examples: $metrics_http printed no address within 30 s" >&2
        exit 1
    fi
    echo "$line"
    mport=$(sed -n 's|.*http://127.0.0.1:\([0-9]*\)/metrics.*|\1|p' <<<"$line")
    scraped=
    scrape_until=$((SECONDS + 60))
    while [ "$SECONDS" -lt "$scrape_until" ]; do
        exec 5<>"/dev/tcp/127.0.0.1/$mport"
        printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&5
        reply=$(timeout 10 cat <&5 | tr -d '\r')
        exec 5<&-
        if grep -q '^messaging_client_sent_messages_total{' <<<"$reply"; then
            scraped=1
            break
        fi
        # no sample yet: the first record's callback has not run, and nothing tells us when
        # it does; 0.2 s is how often we look, the 60 s above the bound
        sleep 0.2
    done
    if [ -z "$scraped" ] || ! grep -q '^HTTP/1.[01] 200' <<<"$reply" ||
        ! grep -qi '^Content-Type: text/plain; version=0.0.4; charset=utf-8$' <<<"$reply"; then
        echo "run_examples: $metrics_http's /metrics answered:" >&2
        head -c 2000 <<<"$reply" >&2
        exit 1
    fi
    echo "metrics_http: GET /metrics: $(grep -c '^# TYPE' <<<"$reply") families, e.g."
    grep '^messaging_client_sent_messages_total{' <<<"$reply" | head -n 1
    kill -TERM "$mpid"
    rc=0
    timeout 30 tail --pid="$mpid" -f /dev/null || { echo "run_examples: $metrics_http did not end within 30 s" >&2; exit 1; }
    wait "$mpid" || rc=$?
    mpid=
    cat <&4
    exec 4<&-
    if [ "$rc" -ne 0 ]; then
        echo "run_examples: $metrics_http exited with status $rc" >&2
        exit 1
    fi
fi

# A dead cluster (issue 19): the server killed under a producer of 3,000,000 records. The
# producer must give up by itself, every call it queued settled (its summary counts them),
# well within appender.delivery.timeout.ms (30 s) after the kill.
# No time decides the order of events: the producer reports its first stored record on
# stderr (a FIFO read here), is stopped with SIGSTOP at once, the server is killed, and only
# then is the producer continued. However fast or slow the machine, the server dies after
# the producer's client opened and before it could store all its records.
kill "$pid"
wait "$pid" 2>/dev/null || true
pid=
rm -f "$dir/out"
mkfifo "$dir/out" "$dir/dead.fifo"
"$server" --listen 127.0.0.1:0 --topics 1 --log-streams 2 >"$dir/out" &
pid=$!
exec 3<"$dir/out"
if ! read -r -t 30 addr <&3; then
    echo "run_examples: $server printed no address within 30 s" >&2
    exit 1
fi
"$producer" "$addr" 1 3000000 >"$dir/dead.out" 2>"$dir/dead.fifo" &
ppid=$!
mpid=$ppid # stopped on every way out, like the metrics program
exec 6<"$dir/dead.fifo"
progress=
while read -r -t 60 line <&6; do
    echo "$line" >>"$dir/dead.err"
    if [[ $line == "producer: first record stored at GLSN "* ]]; then
        progress=1
        break
    fi
done
kill -STOP "$ppid" 2>/dev/null || true # it may have ended: then progress is empty
if [ -z "$progress" ]; then
    echo "run_examples: the producer reported no stored record within 60 s:" >&2
    head -c 2000 "$dir/dead.err" >&2
    exit 1
fi
cat <&6 >>"$dir/dead.err" & # the rest of its stderr, so that it never blocks on the pipe
exec 6<&-
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
pid=
killed=$(date +%s%N)
kill -CONT "$ppid"
rc=0
# Bounded: the producer rides the dead cluster out for appender.delivery.timeout.ms (30 s,
# append.retries -1: a refusal is waited out until the deadline): its first failure comes 30 s
# after the kill, and what it queued meanwhile (a full queue frees room only as calls expire)
# settles at most 30 s later. A producer still running 100 s after the kill fails the test.
timeout 100 tail --pid="$ppid" -f /dev/null || { kill -KILL "$ppid"; echo "run_examples: the producer did not end within 100 s of the server's death" >&2; exit 1; }
wait "$ppid" || rc=$?
mpid=
wait # the stderr reader ends with the producer
took_ms=$((($(date +%s%N) - killed) / 1000000))
cat "$dir/dead.out"
head -c 2000 "$dir/dead.err"
echo "producer ended ${took_ms} ms after the server was killed, exit status $rc"
if [ "$rc" -ne 1 ] || ! grep -q "^producer: .* records stored" "$dir/dead.out"; then
    echo "run_examples: after the server's death the producer should report and exit 1" >&2
    exit 1
fi
