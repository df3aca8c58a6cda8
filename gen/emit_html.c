/*
 * emit_html.c - prints schedule.html: one page (no network, no external
 * scripts or fonts) showing the mesh and block map, every rank's steps with
 * communication marked, bytes and flops per layer, and the memory plan drawn
 * as buffer lifetimes against arena offsets.
 *
 * The page is templates/schedule.html.in with the index schedule.json
 * embedded as its data (tg_emit_schedule_json, whose strings are safe inside
 * <script>). A class's steps and buffers are loaded when one of its ranks is
 * shown, from schedule/rank_iI_jJ.js next to the page, so the page opens in
 * the same time for 4 ranks or 4096 and holds one class at a time. The
 * script only selects, sums and draws that data: every figure on the page is
 * a plan figure or a sum of them. After drawing it sets the document title
 * and #status to "rendered P ranks; rank R: N steps listed", and any script
 * error is written into #errors, which is what the headless-browser test
 * checks.
 */
#include "emit.h"

bool tg_emit_schedule_html(const tg_plan *pl, const tg_sb *index_json, tg_sb *out, tg_err *err)
{
    tg_tvar vars[16];
    char store[8][64];
    int n = tg_emit_common_vars(pl, vars, store);
    vars[n++] = (tg_tvar){"DATA", index_json->s};
    return tg_template_fill(out, "schedule.html.in", vars, n, err);
}
