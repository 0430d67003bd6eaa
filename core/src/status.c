#include "kvc/kvc_types.h"

const char *kvc_status_str(kvc_status s)
{
    switch (s) {
    case KVC_OK: return "ok";
    case KVC_E_ARG: return "invalid argument (a parameter is out of its documented range)";
    case KVC_E_ARENA: return "arena is NULL, misaligned, or smaller than the size function says";
    case KVC_E_STATE: return "state not initialised, corrupted, or call out of order";
    case KVC_E_NONFINITE: return "NaN or Inf in an input vector";
    case KVC_E_CAPACITY: return "capacity exhausted (the method cannot hold another token)";
    case KVC_E_UNSUPPORTED: return "not supported by this build or method";
    case KVC_E_BACKEND: return "accelerator backend failure";
    case KVC_E_FORMAT: return "malformed or unsupported input format";
    case KVC_E_RANGE: return "result outside the float range (the method's denominator estimate collapsed)";
    case KVC_E_CORRUPT: return "state is corrupted (header fields, counters or offsets fail validation)";
    }
    return "unknown status";
}
