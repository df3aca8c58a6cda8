/*
 * tt_spec.h - a tg_spec built in C, without Lua, for the planner's unit tests
 * and bench/place_compare.c. The caller picks shapes the validator accepts
 * (gen/spec.c's rules); every other field gets the loader's default.
 */
#ifndef TT_SPEC_H
#define TT_SPEC_H

#include <stdio.h>
#include <string.h>

#include "spec.h"

static inline tg_spec tt_spec(int q, int d, int layers, int C, int heads, int F, int S, int B, int train)
{
    tg_spec s;
    memset(&s, 0, sizeof s);
    snprintf(s.path, sizeof s.path, "test.lua");
    snprintf(s.name, sizeof s.name, "t");
    s.scheme = TG_SCHEME_TESSERACT;
    s.q = q;
    s.d = d;
    s.p = q * q * d;
    s.layers = layers;
    s.hidden = C;
    s.heads = heads;
    s.ffn = F;
    s.seq = S;
    s.batch = B;
    s.eps = 1e-5;
    s.mode = train ? TG_TRAIN : TG_INFER;
    s.opt = (tg_adamw){.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01};
    s.memory_gib = TG_MEMORY_GIB_DEFAULT;
    s.vocab_align = 1;
    return s;
}

/* The same model on the megatron scheme over p ranks (q = d = 1, as the loader sets them). */
static inline tg_spec tt_spec_megatron(int p, int layers, int C, int heads, int F, int S, int B, int train)
{
    tg_spec s = tt_spec(1, 1, layers, C, heads, F, S, B, train);
    s.scheme = TG_SCHEME_MEGATRON;
    s.p = p;
    return s;
}

#endif
