#ifndef VARLOG_VARLOG_H
#define VARLOG_VARLOG_H

/* Umbrella header of libvarlog, the C client of the Varlog distributed log. */
#include "varlog/export.h"
#include "varlog/error.h"
#include "varlog/version.h"
#include "varlog/log.h"
#include "varlog/conf.h"
#include "varlog/client.h"
#include "varlog/stats.h"
#include "varlog/appender.h"
#include "varlog/subscribe.h"
#include "varlog/admin.h"

#endif
