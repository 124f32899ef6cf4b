#ifndef VARLOG_LOG_IO_CODEC_H
#define VARLOG_LOG_IO_CODEC_H

/*
 * The LogIO messages of the hot paths encoded and decoded by hand: records go straight from
 * the caller's buffers into the bytes gRPC sends, an AppendResponse is read straight into the
 * caller's entry metadata, and a subscribed entry is read in place (its payload points into
 * the received bytes), with no protobuf-c message in between and no allocation per record. Field
 * numbers are Varlog's (proto/snpb/log_io.proto, proto/varlogpb/metadata.proto);
 * tests/unit/test_log_io_codec.c checks both directions against protobuf-c.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "varlog/client.h"
#include "varlog/error.h"
#include "wire.h"

/* AppendRequest fields 1 and 2 (topic_id, log_stream_id): at most this many bytes. */
#define CODEC_HEAD_MAX 22
/* AppendRequest field 3 (one payload) costs its bytes plus at most this much (tag and a
 * length below 2^35). */
#define CODEC_PAYLOAD_OVERHEAD_MAX 6

/* Writes topic_id and log_stream_id (ids >= 1) at p; returns the length. */
size_t codec_put_head(uint8_t *p, int32_t topic_id, int32_t log_stream_id);

/* Writes one payload field (tag, length, the bytes) at p; returns the length, at most
 * len + CODEC_PAYLOAD_OVERHEAD_MAX. */
size_t codec_put_payload(uint8_t *p, const void *data, size_t len);

/* Writes one payload field's tag and length at p, without the bytes (the appender sends them
 * from where they are: varlog_appender_append_ref); returns its length, at most
 * CODEC_PAYLOAD_OVERHEAD_MAX. */
size_t codec_put_payload_head(uint8_t *p, size_t len);

/* Reads one payload field written by codec_put_payload at *p (before end): its bytes into
 * *data and *len (pointing into the encoding), and moves *p past it. Returns false, *p left
 * alone, at the end or when the bytes there are not such a field (another tag, a length
 * running past end). For the ambiguous-append resolver, which compares a batch as sent with
 * what a replica holds. */
bool codec_next_payload(const uint8_t **p, const uint8_t *end, const uint8_t **data, size_t *len);

/* Encoded size of one payload field. */
static inline size_t codec_payload_size(size_t len)
{
    return 1 + wire_varint_len(len) + len;
}

/* Reads an AppendResponse that must hold exactly n results into metas[0..n). On failure
 * writes a reason into why and returns DECODE (malformed, or a result count or meta
 * missing) or RPC_UNKNOWN (a result carrying an error string: servers before v0.26
 * reported a failed suffix of a batch that way). Either way the batch may be stored. */
varlog_err_t codec_read_append_response(const uint8_t *p, size_t len, varlog_entry_meta_t *metas,
                                        size_t n, char *why, size_t why_size);

/* One subscribed entry read in place: data points into the message's bytes and is valid as
 * long as they are. */
typedef struct codec_entry {
    varlog_entry_meta_t meta; /* what the message carries; the rest 0 */
    const uint8_t *data;
    size_t len;
} codec_entry_t;

/* Reads a SubscribeResponse {glsn = 1, llsn = 2, payload = 3} into out (topic and log stream
 * 0: the message does not carry them). Fields may repeat (the last one counts, as in
 * protobuf) or be absent (0, empty). Returns DECODE, with why, when the bytes are not such a
 * message. */
varlog_err_t codec_read_subscribe_response(const uint8_t *p, size_t len, codec_entry_t *out,
                                           char *why, size_t why_size);

/* Reads a SubscribeToResponse {log_entry = 1: LogEntry {meta = 1, data = 2}} into out. A
 * real storage node sets only the meta's LLSN (topic, log stream and GLSN stay 0). A missing
 * log entry is DECODE. */
varlog_err_t codec_read_subscribe_to_response(const uint8_t *p, size_t len, codec_entry_t *out,
                                              char *why, size_t why_size);

#endif
