/*
 * template.h - the text of generated files lives in templates/ with named
 * placeholders @@NAME@@; the build embeds those files into tessgen
 * (tools/embed.c -> build/gen/templates.c) so tessgen is one program.
 * Filling a template substitutes every placeholder; an unknown or unfilled
 * placeholder is an internal error, never silently emitted.
 */
#ifndef TG_TEMPLATE_H
#define TG_TEMPLATE_H

#include <stdbool.h>

#include "err.h"
#include "strbuf.h"

/* The embedded template text by file name ("rank.c.in"), or NULL. */
const char *tg_template_get(const char *name);

typedef struct tg_tvar {
    const char *key; /* without the @@ */
    const char *val;
} tg_tvar;

bool tg_template_fill(tg_sb *out, const char *name, const tg_tvar *vars, int nvars, tg_err *err);

/* h, continued (FNV-1a 64) over the name and text of every embedded template the generated programs and their
 * build are printed from (all but the schedule.html viewer, whose changes need no rebuild). */
unsigned long long tg_templates_hash(unsigned long long h);

#endif
