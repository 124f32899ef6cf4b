#!/usr/bin/env python3
"""Writes the seed corpus of each harness into tests/fuzz/corpus/<harness>/ from valid
encodings of Varlog's messages (field numbers as in proto/), in each harness's input
layout (see the comment at the top of each harness). Rerun after changing a layout:

    python3 tests/fuzz/make_seeds.py
"""
import gzip
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def vf(field, v):  # a varint field; negative ints as protobuf does (10 bytes)
    return varint(field << 3) + varint(v)


def lf(field, data):  # a length-delimited field
    if isinstance(data, str):
        data = data.encode()
    return varint(field << 3 | 2) + varint(len(data)) + data


def piece(data):  # fuzz_piece: 16-bit little-endian length, the bytes
    return struct.pack("<H", len(data)) + data


def meta(topic, ls, glsn, llsn):
    return vf(1, topic) + vf(2, ls) + vf(3, glsn) + vf(4, llsn)


def metadata_descriptor(topics=1, ls_per_topic=1, nodes=1):
    md = vf(1, 7)
    for n in range(1, nodes + 1):
        md += lf(2, lf(1, vf(1, n) + lf(2, "sn%d:1" % n)))
    ls_id = 0
    topic_descs = b""
    for t in range(1, topics + 1):
        ids = []
        for _ in range(ls_per_topic):
            ls_id += 1
            ids.append(ls_id)
            replicas = b"".join(lf(4, vf(1, n)) for n in range(1, nodes + 1))
            md += lf(3, vf(1, t) + vf(2, ls_id) + vf(3, 1 if ls_id % 2 else 2) + replicas)
        topic_descs += lf(4, vf(1, t) + lf(3, b"".join(varint(i) for i in ids)))
    return md + topic_descs


def cluster_info(applied=1):
    member = lf(1, "http://mr:2") + lf(2, "mr:1")
    return lf(1, vf(1, 1) + vf(2, 1) + vf(3, 1) + vf(4, 1) + lf(5, vf(1, 1) + lf(2, member)) +
              vf(6, applied))


def error_detail_status(*texts):
    details = b"".join(
        lf(3, lf(1, "type.googleapis.com/varlog.errpb.ErrorDetail") + lf(2, lf(1, t)))
        for t in texts)
    return vf(1, 14) + lf(2, "unavailable") + details


def append_request(topic, ls, payloads):
    return vf(1, topic) + vf(2, ls) + b"".join(lf(3, p) for p in payloads)


def seeds():
    s = {}
    # fuzz_log_io_codec: selector (decoder = sel % 3, records = sel / 3 % 17), message.
    results = b"".join(lf(1, lf(1, meta(1, 2, 100 + i, 10 + i))) for i in range(3))
    s["fuzz_log_io_codec"] = {
        "append3": bytes([3 * 3]) + results,
        "append_error": bytes([2 * 3]) + lf(1, lf(1, meta(1, 2, 5, 5))) + lf(1, lf(2, "sealed")),
        "append_negative_ids": bytes([3]) + lf(1, lf(1, meta(-1, -2, 1 << 63, 1))),
        "subscribe": bytes([1]) + vf(1, 42) + vf(2, 7) + lf(3, b"hello"),
        "subscribe_to": bytes([2]) + lf(1, lf(1, vf(4, 9)) + lf(2, b"payload")),
    }
    # fuzz_append_request: mode (cut count = mode % 16; 0xff response, 0xfe client request).
    req = append_request(1, 1, [b"a", b"", b"x" * 200, b"yz"])
    s["fuzz_append_request"] = {
        "whole": b"\x00" + req,
        "cut": bytes([4, 1, 3, 0, 7]) + req,
        "unknown_fields": b"\x00" + vf(9, 5) + lf(10, b"?") + req + vf(1, 3),
        "response": b"\xff" + struct.pack("<IIIBIBB", 1, 2, 1000, 3, 5, 0, 10),
        "client_request": b"\xfe" + struct.pack("<IIB", 3, 4, 2) + piece(b"abc") + piece(b""),
    }
    # fuzz_wire: mode (0 cursor, 1 buffer, 2 gzip buffer, 3 status details).
    msg = lf(1, metadata_descriptor(2, 2, 2))
    s["fuzz_wire"] = {
        "cursor": b"\x00\x03\x02\x05\x01\x04" + bytes([0, 0, 0, 1, 3, 0, 2, 2, 0, 27, 0, 0]) +
                  varint(300) + b"abcdefgh" + varint(1 << 40),
        "buffer": b"\x01\x02\x03\x09" + msg,
        "gzip": b"\x02\x01\x10" + gzip.compress(msg),
        "status": b"\x03" + error_detail_status("logstream: trimmed", "log stream: trimmed"),
    }
    # fuzz_conf: errstr size byte, then name=value lines ("@<byte>" = property <byte>).
    s["fuzz_conf"] = {
        "names": b"\x40metadata.addresses=a:1,b:2\nmetadata.call.timeout.ms=500\n"
                 b"log.level=debug\nclient.id=x\n",
        "by_index": b"\x10@\x00=1\n@\x01=true\n@\x02=a,b\n@\x03=-1\n@\x04=99999999999999999999\n",
        "bad": b"\x05nope=1\n=\n@\x07\n",
    }
    # fuzz_client_responses: steps of operation, answer count, answers (status byte 0 = OK).
    ok = lambda m: piece(b"\x00" + m)
    md = lf(1, metadata_descriptor(2, 2, 3))
    replica = lf(1, lf(1, lf(1, vf(1, 1)) + lf(2, vf(1, 1) + vf(2, 1))) + vf(2, 1) +
                 vf(4, 10) + lf(5, vf(1, 1) + vf(2, 1)) + lf(6, vf(1, 5) + vf(2, 9)))
    s["fuzz_client_responses"] = {
        "view": b"\x00\x01" + ok(md),
        "fetch": b"\x01\x01" + ok(md),
        "discover": b"\x02\x03" + ok(cluster_info(3)) + ok(cluster_info(2)) + ok(cluster_info()),
        "peek": b"\x03\x04" + ok(md) + ok(replica) + ok(replica) + piece(b"\x0eunavailable") +
                b"\x01",
        "trim": b"\x05\x03" + ok(md) + ok(b"") + ok(b"") + b"\x00\x10\x00\x00\x00",
        "admin_list_topics": b"\x06\x01" + ok(lf(1, vf(1, 1)) + lf(1, vf(1, 2))) + b"\x02\x00\x02",
        "admin_status": b"\x06\x01" + piece(b"\x05not found") + b"\x01\x01\x00",
    }
    # fuzz_server_requests: shape, then calls (method byte; a piece, or Append's messages).
    append = b"\x02\x02" + b"\x00" + piece(req) + b"\x02\x03\x05" + piece(req)
    s["fuzz_server_requests"] = {
        "append_subscribe": b"\x04" + append + b"\x03" + piece(vf(1, 1) + vf(2, 10) + vf(3, 1) +
                                                               vf(4, 1)),
        "subscribe_to": b"\x04" + append + b"\x04" + piece(vf(1, 1) + vf(2, 1) + vf(3, 1) +
                                                           vf(4, 5)),
        "metadata": b"\x08\x00" + piece(vf(1, 1)) + b"\x01" + piece(b""),
        "admin": b"\x04\x0e" + piece(b"") + b"\x12" + piece(vf(1, 1)) + b"\x16" +
                 piece(vf(1, 1) + vf(2, 1)) + b"\x19" + piece(vf(1, 1) + vf(2, 1)),
        "retention": b"\x44\x01" + append + append + b"\x05" + piece(vf(1, 1) + vf(2, 1)),
    }
    return s


def main():
    for harness, files in seeds().items():
        d = os.path.join(HERE, "corpus", harness)
        os.makedirs(d, exist_ok=True)
        for name, data in files.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
