/**
 * @file kvc.h
 * @brief kvcompress umbrella header: streaming KV-cache compression with a
 *        bounded attention error, in caller-provided memory.
 */
#ifndef KVC_H
#define KVC_H

#include "kvc_types.h"
#include "kvc_rng.h"
#include "kvc_kernels.h"
#include "kvc_attend.h"
#include "kvc_stream.h"
#include "kvc_uniform.h"
#include "kvc_subgen.h"
#include "kvc_balancekv.h"
#include "kvc_express.h"
#include "kvc_cache.h"
#include "kvc_fixed.h"
#include "kvc_sizes.h"

#endif
