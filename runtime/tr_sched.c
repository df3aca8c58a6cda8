/*
 * tr_sched.c - the learning rate of a training step: linear warmup, then a cosine decay to lr_min
 * (tr_sched.h). Computed in double; tr_adamw rounds it to float once per step, as it did the
 * constant rate before.
 */
#include "tr_sched.h"

#include <math.h>

double tr_sched_lr(double lr, double lr_min, long long warmup, long long decay_steps, long long step)
{
    if (warmup > 0 && step <= warmup)
        return lr * (double)step / (double)warmup;
    if (decay_steps <= 0)
        return lr;
    long long t = step - (warmup > 0 ? warmup : 0); /* steps into the decay, 1.. */
    if (t >= decay_steps)
        return lr_min;
    double ratio = (double)t / (double)decay_steps, coeff = 0.5 * (1.0 + cos(M_PI * ratio));
    return lr_min + coeff * (lr - lr_min);
}
