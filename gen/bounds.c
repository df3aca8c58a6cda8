/*
 * bounds.c - the work and memory bounds (see bounds.h). Every figure in a
 * message comes from planning: the steps of class (0,0) at one and two layers,
 * the arenas of every class, and for "what fits", the plan at the depth or on
 * the mesh it proposes, planned and checked before it is proposed.
 */
#include "bounds.h"

#include <stdio.h>
#include <string.h>

/* An arena of `elems` floats for people: "48.60 GiB", "138.5 KiB"; returns buf. */
static const char *size_text(char *buf, size_t cap, long long elems)
{
    double b = 4.0 * (double)elems;
    if (b >= 1024.0 * 1024.0 * 1024.0)
        snprintf(buf, cap, "%.2f GiB", b / (1024.0 * 1024.0 * 1024.0));
    else if (b >= 1024.0 * 1024.0)
        snprintf(buf, cap, "%.2f MiB", b / (1024.0 * 1024.0));
    else
        snprintf(buf, cap, "%.1f KiB", b / 1024.0);
    return buf;
}

static long long budget_elems(const tg_spec *s)
{
    return (long long)(s->memory_gib * 1024.0 * 1024.0 * 1024.0 / 4.0);
}

/* Steps of class (0,0) of the spec at `layers` layers. */
static bool class0_steps(const tg_spec *spec, int layers, long long *steps, tg_err *err)
{
    tg_spec s = *spec;
    s.layers = layers;
    tg_plan pl;
    tg_plan_init(&s, &pl);
    tg_class_plan cp;
    if (!tg_plan_class(&pl, 0, 0, &cp, err))
        return false;
    *steps = cp.nsteps;
    tg_class_free(&cp);
    return true;
}

/* The largest arena over every class of the spec with `layers` layers on mesh [q,q,d]; cls: its class. */
static bool arena_max(const tg_spec *spec, int q, int d, int layers, long long *arena, int *cls, tg_err *err)
{
    tg_spec s = *spec;
    s.q = q;
    s.d = d;
    s.layers = layers;
    tg_plan pl;
    tg_plan_init(&s, &pl);
    *arena = -1;
    for (int c = 0; c < tg_plan_nclasses(&pl); c++) {
        tg_class_plan cp;
        if (!tg_plan_class_n(&pl, c, &cp, err))
            return false;
        if (cp.arena_elems > *arena) {
            *arena = cp.arena_elems;
            if (cls)
                *cls = c;
        }
        tg_class_free(&cp);
    }
    return true;
}

long long tg_bounds_class_steps(const tg_plan *pl, tg_err *err)
{
    long long s1, s2;
    if (!class0_steps(&pl->spec, 1, &s1, err) || !class0_steps(&pl->spec, 2, &s2, err))
        return -1;
    return s1 + (long long)(pl->spec.layers - 1) * (s2 - s1);
}

bool tg_bounds_work(const tg_plan *pl, tg_err *err)
{
    const tg_spec *s = &pl->spec;
    long long s1, s2;
    if (!class0_steps(s, 1, &s1, err) || !class0_steps(s, 2, &s2, err))
        return false;
    long long per = s2 - s1, nc = tg_plan_nclasses(pl), steps = s1 + (long long)(s->layers - 1) * per;
    if (steps <= TG_MAX_CLASS_STEPS && steps <= TG_MAX_STEPS / nc)
        return true;
    long long cap = TG_MAX_CLASS_STEPS < TG_MAX_STEPS / nc ? TG_MAX_CLASS_STEPS : TG_MAX_STEPS / nc;
    long long fit = cap < s1 ? 0 : (cap - s1) / (per > 0 ? per : 1) + 1;
    char fix[256], mt[48];
    int mg = pl->mesh.scheme == TG_SCHEME_MEGATRON;
    if (fit >= 1)
        snprintf(fix, sizeof fix, "use layers = %lld or fewer on this mesh, or a mesh with a smaller %s (fewer rank "
                                  "programs)", fit, mg ? "p" : "q");
    else
        snprintf(fix, sizeof fix, "no depth fits on this mesh: use a mesh with a smaller %s (fewer rank programs, "
                                  "fewer steps each)", mg ? "p" : "q");
    tg_mesh_text(&pl->mesh, mt, sizeof mt);
    return tg_fail(err,
                   "%s: model.layers = %d on mesh %s: each of the %lld rank programs would have %lld steps "
                   "(%lld in all), beyond tessgen's limits of %lld steps per program and %lld in all, which bound "
                   "its time, its memory and what it writes; %s",
                   s->path, s->layers, mt, nc, steps, steps * nc, TG_MAX_CLASS_STEPS, TG_MAX_STEPS, fix);
}

void tg_bounds_line(char *buf, size_t cap, const tg_plan *pl, const tg_class_fig *figs)
{
    long long a = 0;
    int at = 0;
    for (int c = 0; c < tg_plan_nclasses(pl); c++)
        if (figs[c].arena > a) {
            a = figs[c].arena;
            at = c;
        }
    bool fits = a <= budget_elems(&pl->spec);
    char sz[32];
    snprintf(buf, cap, "memory: memory_gib = %g per rank; the largest arena, %s (class (%d,%d)), %s", pl->spec.memory_gib,
             size_text(sz, sizeof sz, a), at / pl->mesh.q, at % pl->mesh.q,
             fits ? "fits" : "does NOT fit: tessgen refuses to generate this spec");
}

bool tg_bounds_memory(const tg_plan *pl, const tg_class_fig *figs, tg_err *err)
{
    const tg_spec *s = &pl->spec;
    long long budget = budget_elems(s), worst = 0;
    int at = 0, q = pl->mesh.q;
    for (int c = 0; c < tg_plan_nclasses(pl); c++)
        if (figs[c].arena > worst) {
            worst = figs[c].arena;
            at = c;
        }
    if (worst <= budget)
        return true;
    char fits[1024] = "";
    size_t o = 0;
    /* the deepest model that fits on this mesh: arenas grow about linearly with layers; the guess is then
     * planned, and lowered until it fits */
    tg_err e = {{0}, 0};
    long long a1, a2;
    if (arena_max(s, q, pl->mesh.d, 1, &a1, NULL, &e) && s->layers > 1 &&
        arena_max(s, q, pl->mesh.d, 2, &a2, NULL, &e)) {
        long long slope = a2 - a1 > 0 ? a2 - a1 : 1;
        long long guess = a1 > budget ? 0 : (budget - a1) / slope + 1;
        if (guess >= s->layers)
            guess = s->layers - 1;
        for (int tries = 0; guess >= 1 && tries < 4; tries++, guess--) {
            long long a;
            if (!arena_max(s, q, pl->mesh.d, (int)guess, &a, NULL, &e))
                break;
            if (a <= budget) {
                char sz[32];
                o += (size_t)snprintf(fits + o, sizeof fits - o, "layers = %lld or fewer on this mesh (%s)", guess,
                                      size_text(sz, sizeof sz, a));
                break;
            }
        }
    }
    /* the other meshes with as many ranks whose every arena fits */
    int p = pl->mesh.p;
    for (int q2 = p; q2 >= 1; q2--) {
        if (p % (q2 * q2) || (q2 == q && pl->mesh.scheme == TG_SCHEME_TESSERACT))
            continue;
        int d2 = p / (q2 * q2);
        tg_spec copy;
        tg_err ae = {{0}, 0};
        if (!tg_spec_on_mesh(s, q2, d2, &copy, &ae))
            continue;
        tg_plan ap;
        tg_plan_init(&copy, &ap);
        long long a;
        if (!tg_bounds_work(&ap, &ae) || !arena_max(&copy, q2, d2, s->layers, &a, NULL, &ae) || a > budget)
            continue;
        char sz[32];
        o += (size_t)snprintf(fits + o, sizeof fits - o, "%smesh [%d,%d,%d] (%s)", o ? ", or " : "", q2, q2, d2,
                              size_text(sz, sizeof sz, a));
        if (o > sizeof fits - 64)
            break;
    }
    char sz[32];
    return tg_fail(err,
                   "%s: memory_gib = %g: the largest arena, %s for the ranks of class (i=%d, j=%d), does not fit "
                   "in %g GiB per rank; what fits: %s; or raise memory_gib if the ranks have more memory",
                   s->path, s->memory_gib, size_text(sz, sizeof sz, worst), at / q, at % q, s->memory_gib,
                   o ? fits : "no depth of this model on these meshes");
}
