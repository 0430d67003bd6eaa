#ifndef KVC_APP_GGUF_H
#define KVC_APP_GGUF_H
/** `kvc gguf`: inspect a GGUF file, dump a dequantised tensor. */
int kvc_cmd_gguf(int argc, char **argv);
#endif
