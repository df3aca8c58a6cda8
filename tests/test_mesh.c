/*
 * test_mesh.c - the mesh math checked exhaustively for q, d in 1..8 against
 * brute force from the definitions of DESIGN.md section 1 (not against the
 * formulas in mesh.c): every rank <-> coordinate round trip, every group's
 * membership and ordering, colors that identify groups, and the SUMMA roots
 * DESIGN.md gives as literals (row root t + q*i + q*q*k, col root j + q*t + q*q*k)
 * for the default placement, and the rank formulas of the other placements.
 */
#include <stdlib.h>

#include "mesh.h"
#include "tt.h"

/* Does rank b (coords cb) belong to the group of kind g holding a (coords ca)? By definition. */
static int same_group(tg_group g, tg_coord ca, tg_coord cb)
{
    switch (g) {
    case TG_ROW: return ca.i == cb.i && ca.k == cb.k;
    case TG_COL: return ca.j == cb.j && ca.k == cb.k;
    case TG_DEP: return ca.i == cb.i && ca.j == cb.j;
    case TG_COLDEP: return ca.j == cb.j;
    case TG_WORLD: return 1;
    default: return 0;
    }
}

int main(void)
{
    TT_CASE("rank <-> coordinates, q,d in 1..8") {
        for (int q = 1; q <= 8; q++)
            for (int d = 1; d <= 8; d++) {
                tg_mesh m = tg_mesh_make(q, d, TG_PLACE_ROW);
                TT_CHECK(m.p == q * q * d, "p=%d", m.p);
                int r = 0;
                /* enumerate in the order r = j + q*i + q*q*k grows: k outer, i, then j */
                for (int k = 0; k < d; k++)
                    for (int i = 0; i < q; i++)
                        for (int j = 0; j < q; j++, r++) {
                            tg_coord c = {i, j, k};
                            TT_CHECK(tg_mesh_rank(&m, c) == r, "q=%d d=%d (%d,%d,%d) -> %d, want %d",
                                     q, d, i, j, k, tg_mesh_rank(&m, c), r);
                            tg_coord b = tg_mesh_coord(&m, r);
                            TT_CHECK(b.i == i && b.j == j && b.k == k, "q=%d d=%d rank %d -> (%d,%d,%d)",
                                     q, d, r, b.i, b.j, b.k);
                            TT_CHECK(tg_mesh_row_block(&m, c) == i + q * k, "row block");
                        }
            }
    }

    TT_CASE("placements: the rank formulas of mesh.h, a bijection, the named group consecutive, q,d in 1..6") {
        for (int pl = 0; pl < TG_NPLACEMENTS; pl++)
            for (int q = 1; q <= 6; q++)
                for (int d = 1; d <= 6; d++) {
                    tg_mesh m = tg_mesh_make(q, d, (tg_placement)pl);
                    char *seen = calloc((size_t)m.p, 1);
                    for (int k = 0; k < d; k++)
                        for (int i = 0; i < q; i++)
                            for (int j = 0; j < q; j++) {
                                tg_coord c = {i, j, k};
                                int want = pl == TG_PLACE_ROW   ? j + q * i + q * q * k
                                           : pl == TG_PLACE_COL ? i + q * j + q * q * k
                                                                : k + d * j + d * q * i;
                                int r = tg_mesh_rank(&m, c);
                                TT_CHECK(r == want, "%s q=%d d=%d (%d,%d,%d) -> %d, want %d",
                                         tg_placement_name((tg_placement)pl), q, d, i, j, k, r, want);
                                if (r >= 0 && r < m.p) {
                                    TT_CHECK(!seen[r], "rank %d twice", r);
                                    seen[r] = 1;
                                }
                                tg_coord b = tg_mesh_coord(&m, want);
                                TT_CHECK(b.i == i && b.j == j && b.k == k, "%s q=%d d=%d coord(%d)",
                                         tg_placement_name((tg_placement)pl), q, d, want);
                                /* the named group: members 0..n-1 are consecutive ranks */
                                tg_group g = pl == TG_PLACE_ROW ? TG_ROW : pl == TG_PLACE_COL ? TG_COL : TG_DEP;
                                int r0 = tg_group_member(&m, g, c, 0);
                                for (int l = 0; l < tg_group_size(&m, g); l++)
                                    TT_CHECK(tg_group_member(&m, g, c, l) == r0 + l, "%s group not consecutive",
                                             tg_placement_name((tg_placement)pl));
                            }
                    free(seen);
                }
    }

    TT_CASE("groups: members, local order, sizes, colors, q,d in 1..8, every placement") {
        for (int pl = 0; pl < TG_NPLACEMENTS; pl++)
        for (int q = 1; q <= 8; q++)
            for (int d = 1; d <= 8; d++) {
                tg_mesh m = tg_mesh_make(q, d, (tg_placement)pl);
                for (int g = 0; g < TG_NGROUPS; g++) {
                    for (int a = 0; a < m.p; a++) {
                        tg_coord ca = tg_mesh_coord(&m, a);
                        /* brute-force members, ordered by rank */
                        int n = 0;
                        for (int b = 0; b < m.p; b++)
                            if (same_group((tg_group)g, ca, tg_mesh_coord(&m, b)))
                                n++;
                        TT_CHECK(n == tg_group_size(&m, (tg_group)g), "q=%d d=%d %s size %d vs %d", q, d,
                                 tg_group_name((tg_group)g), n, tg_group_size(&m, (tg_group)g));
                        /* local indices are a bijection onto 0..n-1 and member() inverts local() */
                        char *seen = calloc((size_t)n, 1);
                        for (int b = 0; b < m.p; b++) {
                            tg_coord cb = tg_mesh_coord(&m, b);
                            int same = same_group((tg_group)g, ca, cb);
                            int colors_equal = tg_group_color(&m, (tg_group)g, ca) ==
                                               tg_group_color(&m, (tg_group)g, cb);
                            TT_CHECK(same == colors_equal, "q=%d d=%d %s color of %d vs %d", q, d,
                                     tg_group_name((tg_group)g), a, b);
                            if (!same)
                                continue;
                            int l = tg_group_local(&m, (tg_group)g, cb);
                            TT_CHECK(l >= 0 && l < n, "local %d out of range", l);
                            if (l >= 0 && l < n) {
                                TT_CHECK(!seen[l], "local %d twice", l);
                                seen[l] = 1;
                            }
                            TT_CHECK(tg_group_member(&m, (tg_group)g, ca, l) == b,
                                     "q=%d d=%d %s member(%d) of group of %d = %d, want %d", q, d,
                                     tg_group_name((tg_group)g), l, a,
                                     tg_group_member(&m, (tg_group)g, ca, l), b);
                        }
                        free(seen);
                        /* colors are in 0..(number of groups)-1 so MPI_Comm_split gets small colors */
                        int c = tg_group_color(&m, (tg_group)g, ca);
                        TT_CHECK(c >= 0 && c < m.p / n, "color %d", c);
                    }
                }
            }
    }

    TT_CASE("megatron mesh, p in 1..16: rank r = (r, 0, 0), world holds every rank in rank order, other groups of one") {
        for (int p = 1; p <= 16; p++) {
            tg_mesh m = tg_mesh_make_megatron(p);
            TT_CHECK(m.p == p && m.q == 1 && m.d == 1 && m.scheme == TG_SCHEME_MEGATRON, "p=%d", p);
            for (int r = 0; r < p; r++) {
                tg_coord c = tg_mesh_coord(&m, r);
                TT_CHECK(c.i == r && c.j == 0 && c.k == 0 && tg_mesh_rank(&m, c) == r, "p=%d rank %d", p, r);
                TT_CHECK(tg_group_size(&m, TG_WORLD) == p && tg_group_local(&m, TG_WORLD, c) == r &&
                             tg_group_color(&m, TG_WORLD, c) == 0 && tg_group_used(&m, TG_WORLD),
                         "p=%d world of rank %d", p, r);
                for (int l = 0; l < p; l++)
                    TT_CHECK(tg_group_member(&m, TG_WORLD, c, l) == l, "p=%d world member %d", p, l);
                for (int g = TG_ROW; g <= TG_COLDEP; g++)
                    TT_CHECK(tg_group_size(&m, (tg_group)g) == 1 && tg_group_local(&m, (tg_group)g, c) == 0 &&
                                 tg_group_member(&m, (tg_group)g, c, 0) == r && !tg_group_used(&m, (tg_group)g),
                             "p=%d rank %d %s", p, r, tg_group_name((tg_group)g));
            }
        }
    }

    TT_CASE("coldep local index is i + q*k (DESIGN.md table)") {
        for (int q = 1; q <= 8; q++)
            for (int d = 1; d <= 8; d++) {
                tg_mesh m = tg_mesh_make(q, d, TG_PLACE_ROW);
                for (int r = 0; r < m.p; r++) {
                    tg_coord c = tg_mesh_coord(&m, r);
                    TT_CHECK(tg_group_local(&m, TG_COLDEP, c) == c.i + q * c.k, "coldep local");
                    TT_CHECK(tg_group_local(&m, TG_ROW, c) == c.j, "row local");
                    TT_CHECK(tg_group_local(&m, TG_COL, c) == c.i, "col local");
                    TT_CHECK(tg_group_local(&m, TG_DEP, c) == c.k, "dep local");
                }
            }
    }

    TT_CASE("SUMMA roots as DESIGN.md section 2 gives them, q,d in 1..8") {
        for (int q = 1; q <= 8; q++)
            for (int d = 1; d <= 8; d++) {
                tg_mesh m = tg_mesh_make(q, d, TG_PLACE_ROW);
                for (int r = 0; r < m.p; r++) {
                    tg_coord c = tg_mesh_coord(&m, r);
                    for (int t = 0; t < q; t++) {
                        int row_root = tg_group_member(&m, TG_ROW, c, t);
                        int col_root = tg_group_member(&m, TG_COL, c, t);
                        TT_CHECK(row_root == t + q * c.i + q * q * c.k, "row root q=%d d=%d r=%d t=%d", q, d,
                                 r, t);
                        TT_CHECK(col_root == c.j + q * t + q * q * c.k, "col root q=%d d=%d r=%d t=%d", q, d,
                                 r, t);
                    }
                }
            }
    }

    TT_CASE("group labels") {
        tg_mesh m = tg_mesh_make(2, 2, TG_PLACE_ROW);
        char b[32];
        tg_coord c = {1, 0, 1};
        tg_group_label(&m, TG_ROW, c, b, sizeof b);
        TT_CHECK(strcmp(b, "row(1,1)") == 0, "%s", b);
        tg_group_label(&m, TG_COL, c, b, sizeof b);
        TT_CHECK(strcmp(b, "col(0,1)") == 0, "%s", b);
        tg_group_label(&m, TG_DEP, c, b, sizeof b);
        TT_CHECK(strcmp(b, "dep(1,0)") == 0, "%s", b);
        tg_group_label(&m, TG_COLDEP, c, b, sizeof b);
        TT_CHECK(strcmp(b, "coldep(0)") == 0, "%s", b);
    }
    TT_EXIT();
}
