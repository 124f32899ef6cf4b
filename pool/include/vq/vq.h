#ifndef VQ_VQ_H
#define VQ_VQ_H

/* pool/: the generic queue engine. No gRPC or protobuf anywhere below. */
#include "vq/err.h"
#include "vq/ring.h"
#include "vq/logger.h"
#include "vq/metrics.h"
#include "vq/task.h"
#include "vq/engine.h"
#include "vq/objpool.h"
#include "vq/batcher.h"

#endif
