/* net_config.h: a network spec (numerics/net.h) from the config's rows for one network
 * (its conv_layer_params, fc_layer_params, activation) and the env's observation
 * (flat, or an image with obs_shape and obs_dtype): what PPO and DQN build their nets
 * from, with the errors a config that cannot be built gets, naming its line. */
#ifndef CALF_NET_CONFIG_H
#define CALF_NET_CONFIG_H

#include "calf/config.h"
#include "calf/env.h"
#include "calf/error.h"
#include "numerics/net.h"

/* The observation as a network sees it: flat (h = w = c = 0) or an image (H, W, C), and
 * whether it comes as bytes. From the env spec's obs_shape and obs_dtype. */
typedef struct net_obs {
    int dim, h, w, c;
    bool u8;
    int high;   /* u8: the largest value the env writes (the spec's obs_high; 0: 255) */
    int num_parts;                /* a Dict observation's named parts (the spec's), or 0 */
    const calf_obs_part *parts;   /* (num_parts), the spec's */
} net_obs;
net_obs net_obs_of(const calf_env_spec *spec);

/* *ns for the network of rows conv_id (a CONV_LAYERS row), fc_id (an INT_TUPLE row) and
 * act_id (a 'tanh'|'relu' STRING row) on obs, with a linear head of out; a uint8
 * observation's scale is EncodingNetwork.uint8_scale, or when None (float)(1.0 / high)
 * (1/255 for pixels, 1 for 0/1 images, whose bytes then reach the net as they are). CALF_EINVAL
 * naming the conv row's line when it asks for conv layers on a flat observation (a Dict
 * without an image part named, with its parts) or ones that do not fit the image. On a
 * Dict with image parts (rank 3, (H, W, C)), the spec is SB3's CombinedExtractor: each
 * image part through a stack of the conv layers of its own (1..4 image parts), the
 * vector parts beside them as they are, concatenated in the parts' order (the flat
 * observation's) before the fc layers; a uint8 image part of a float observation is
 * scaled as a uint8 observation is. */
int net_config_spec(const calf_config *cfg, calf_binding_id conv_id, calf_binding_id fc_id,
                    calf_binding_id act_id, const net_obs *obs, int out, net_spec *ns,
                    calf_error *err);

/* net_config_spec, then net_layout on it (no memory taken): whether the network can be
 * built, for an algorithm's check before any worker starts. */
int net_config_check(const calf_config *cfg, calf_binding_id conv_id, calf_binding_id fc_id,
                     calf_binding_id act_id, const net_obs *obs, int out, calf_error *err);

/* An activation row's value ('tanh'|'relu') as the layers take it: relu, or tanh for
 * anything else the row allows. Every algorithm's networks read their rows through it. */
nn_activation net_config_activation(const char *name);

#endif
