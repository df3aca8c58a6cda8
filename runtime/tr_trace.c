/*
 * tr_trace.c - step markers. Generated code calls TR_STEP(c, id) before each
 * step; the runtime records which step is running (for error messages and
 * per-step statistics).
 */
#include "tr_ctx.h"

void tr_step_mark(tr_ctx *c, int id)
{
    c->cur_step = id;
}
