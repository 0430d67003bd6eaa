#ifndef KVC_APP_PROFILE_H
#define KVC_APP_PROFILE_H
/** `kvc profile`: score every (layer, kv head) of a model as streaming,
 *  retrieval or diffuse, and write the head profile kvc bench --head-profile reads. */
int kvc_cmd_profile(int argc, char **argv);
#endif
