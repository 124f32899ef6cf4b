"""The Python binding against a real Varlog v0.30 cluster (CTest python_cluster, label
cluster): records appended through the binding are read back by Varlog's Go varlogcli at
the GLSN/LLSN the binding reported, once each and intact, and lines varlogcli appended are
read back through the binding, once each, without gaps. The cluster is started by
scripts/varlog-cluster.sh (from $VARLOG_BIN or ../shared/varlog) and stopped, also on
failure, with its processes' log tails printed when a test fails."""

import os
import re
import subprocess
import sys

import pytest

import varlog

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "varlog-cluster.sh")
WORKDIR = os.environ.get("VARLOG_PY_CLUSTER_DIR", os.path.join(REPO, "build", "py-cluster"))


def have_binaries():
    return bool(os.environ.get("VARLOG_BIN")) or os.path.isdir(
        os.path.join(REPO, "..", "shared", "varlog"))


@pytest.fixture(scope="module")
def cluster():
    if not have_binaries():
        msg = "no Varlog binaries: set VARLOG_BIN or provide ../shared/varlog"
        if os.environ.get("CI") == "true":
            pytest.fail(msg + " (CI=true)")
        pytest.skip(msg)
    env_file = os.path.join(WORKDIR, "cluster.env")
    subprocess.run([SCRIPT, "start", "--dir", WORKDIR, "--sns", "1", "--log-streams", "2",
                    "--owner-pid", str(os.getpid())], check=True, stdout=subprocess.DEVNULL,
                   timeout=180)
    try:
        env = {}
        with open(env_file) as f:
            for line in f:
                m = re.match(r"(?:export )?(\w+)=['\"]?([^'\"\n]*)", line)
                if m:
                    env[m.group(1)] = m.group(2)
        vbin = subprocess.run([SCRIPT, "bin"], check=True, capture_output=True, text=True,
                              timeout=120).stdout.strip().splitlines()[-1]
        env["varlogcli"] = os.path.join(vbin, "varlogcli")
        yield env
    finally:
        # pytest shows this captured output only with a failure
        logs = subprocess.run([SCRIPT, "logs", "--dir", WORKDIR, "--lines", "20"],
                              capture_output=True, text=True)
        print(logs.stdout[-4000:], file=sys.stderr)
        subprocess.run([SCRIPT, "stop", "--dir", WORKDIR], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60)


def test_varlogcli_reads_what_the_binding_appended(cluster):
    topic = int(cluster["VARLOG_TOPIC_ID"])
    tag = "py%d" % os.getpid()
    records = [("%s-rec-%03d" % (tag, i)).encode() for i in range(40)]
    with varlog.Client(cluster["VARLOG_MR_ADDRS"], open_timeout_ms=30000) as c:
        metas = c.append(topic, records[:10], timeout=30)
        with c.appender(topic) as app:
            futs = [app.append(r) for r in records[10:]]
        metas += [f.result() for f in futs]
    try:
        p = subprocess.run([cluster["varlogcli"], "subscribe", "--mr", cluster["VARLOG_MR_ADDRS"],
                            "--tpid", str(topic)], capture_output=True, text=True, timeout=8)
        out = p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:  # it tails for ever: read what it printed
        out = (e.stdout or b"").decode() + (e.stderr or b"").decode()
    for rec, m in zip(records, metas):
        hits = re.findall(r"Subscribe: %s \(.*?GLSN:(\d+) LLSN:(\d+)\} Data:\[([\d ]*)\]"
                          % re.escape(rec.decode()), out)
        assert len(hits) == 1, (rec, out[-2000:])
        g, l, data = hits[0]
        assert (int(g), int(l)) == (m.glsn, m.llsn)
        assert bytes(int(b) for b in data.split()) == rec


def test_binding_reads_what_varlogcli_appended(cluster):
    topic = int(cluster["VARLOG_TOPIC_ID"])
    lines = ["vcli%d-line-%03d" % (os.getpid() % 100000, i) for i in range(30)]
    subprocess.run([cluster["varlogcli"], "append", "--mr", cluster["VARLOG_MR_ADDRS"],
                    "--tpid", str(topic)], input="\n".join(lines) + "\n", text=True,
                   check=True, capture_output=True, timeout=60)
    with varlog.Client(cluster["VARLOG_MR_ADDRS"], open_timeout_ms=30000) as c:
        last = max(c.peek(topic, ls)[1].glsn for ls in c.log_streams(topic))
        entries = list(c.subscribe(topic, 1, last + 1))
    assert [e.glsn for e in entries] == list(range(1, last + 1))  # gapless
    seen = [e.data.decode(errors="replace") for e in entries]
    for line in lines:
        assert seen.count(line) == 1, line
