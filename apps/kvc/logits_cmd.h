#ifndef KVC_APP_LOGITS_H
#define KVC_APP_LOGITS_H
#include "llama2c.h"
/** Load a llama2.c checkpoint, or a Llama GGUF when the path ends in .gguf. */
kvc_status kvc_model_load_any(const char *path, kvc_l2c_model *m, char *err, size_t errlen);
#endif
