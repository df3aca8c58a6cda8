/*
 * tr_sched.h - the learning-rate schedule of training (spec keys optimizer.warmup, decay_steps, lr_min;
 * docs/TRAINING.md "Learning-rate schedule").
 *
 * Steps count from 1. For step <= warmup the rate rises linearly, lr * step / warmup; after it, a
 * cosine from lr down to lr_min over decay_steps steps (llm.c's form), lr_min after them; with
 * decay_steps = 0 it stays lr. With warmup = decay_steps = 0 (the defaults) every step gets exactly
 * lr, so a spec without the keys trains bit for bit as before. A pure function of its arguments (no
 * tr_model, no MPI), so every rank computes the same double and the unit tests can call it; the main
 * loop passes tr_model's fields and puts the result into the context for tr_adamw.
 */
#ifndef TR_SCHED_H
#define TR_SCHED_H

/* The learning rate of step `step` (>= 1). */
double tr_sched_lr(double lr, double lr_min, long long warmup, long long decay_steps, long long step);

#endif
