/*
 * mesh.h - the [q,q,d] processor mesh of DESIGN.md section 1: rank <-> (i,j,k)
 * coordinates, the four communicator groups, and collective roots.
 *
 * Everything here is a pure function of (q, d) and a rank; the planner uses it
 * to bake literal roots into the schedule and the emitters print the group
 * colors/keys that the runtime passes to MPI_Comm_split, so the generator is
 * the only place this arithmetic lives.
 *
 *   global rank   r = i*si + j*sj + k*sk, the strides set by the placement:
 *     "row" (default)  r = j + q*i + q*q*k   row groups numbered consecutively
 *     "col"            r = i + q*j + q*q*k   column groups numbered consecutively
 *     "dep"            r = k + d*j + d*q*i   depth groups numbered consecutively
 *   A launcher fills nodes in rank order (mpirun --map-by slot, srun's block
 *   distribution), so the placement decides which group stays inside a node
 *   when its size divides the ranks per node: the cost model (cost.c) and the
 *   advisor read it from here, and the generated tables carry the strides.
 *   row(i,k)      members (i,*,k)  local index j   color i + q*k
 *   col(j,k)      members (*,j,k)  local index i   color j + q*k
 *   dep(i,j)      members (i,j,*)  local index k   color j + q*i
 *   coldep(j)     members (*,j,*)  local index i + q*k   color j
 *   world         every rank       local index r          color 0
 *
 * The Megatron-LM 1-D scheme (scheme = "megatron", mesh { p = N }) has no
 * [q,q,d] structure: its mesh holds q = d = 1 (unused) and p ranks, rank r
 * has coordinates (i = r, j = 0, k = 0) (so the class number i*q + j is r
 * and class r is (r, 0) as everywhere else), and its one group is world.
 * The [q,q,d] groups of a megatron mesh are groups of one (member self).
 */
#ifndef TG_MESH_H
#define TG_MESH_H

typedef enum tg_placement {
    TG_PLACE_ROW = 0, /* r = j + q*i + q*q*k */
    TG_PLACE_COL = 1, /* r = i + q*j + q*q*k */
    TG_PLACE_DEP = 2, /* r = k + d*j + d*q*i */
    TG_NPLACEMENTS = 3
} tg_placement;

/* "row", "col", "dep": the spec's mesh.placement values (inline: spec.c uses it without linking mesh.c) */
static inline const char *tg_placement_name(tg_placement p)
{
    return p == TG_PLACE_ROW ? "row" : p == TG_PLACE_COL ? "col" : p == TG_PLACE_DEP ? "dep" : "?";
}

/* How the ranks split the model: Tesseract [q,q,d] (DESIGN.md) or Megatron-LM 1-D over p ranks. */
typedef enum tg_scheme { TG_SCHEME_TESSERACT = 0, TG_SCHEME_MEGATRON = 1 } tg_scheme;

typedef struct tg_mesh {
    int q, d;              /* mesh [q,q,d]; 1 and 1 for megatron */
    int p;                 /* q*q*d ranks; for megatron the p of mesh { p = N } */
    int scheme;            /* tg_scheme */
    tg_placement placement; /* tesseract: which group's ranks are consecutive; megatron: "row" (rank = i) */
    int si, sj, sk;        /* tesseract: rank = i*si + j*sj + k*sk; megatron: 1, 0, 0 */
} tg_mesh;

typedef struct tg_coord {
    int i, j, k; /* row, column, depth */
} tg_coord;

typedef enum tg_group {
    TG_ROW = 0,
    TG_COL = 1,
    TG_DEP = 2,
    TG_COLDEP = 3,
    TG_WORLD = 4, /* every rank: the megatron scheme's all-reduces */
    TG_NGROUPS = 5
} tg_group;

tg_mesh tg_mesh_make(int q, int d, tg_placement placement);
/* The 1-D mesh of p ranks of the megatron scheme: rank r is (r, 0, 0). */
tg_mesh tg_mesh_make_megatron(int p);
int tg_mesh_rank(const tg_mesh *m, tg_coord c);
/* "rank = j + q*i + q*q*k" (or the placement's formula), for people. */
const char *tg_mesh_rank_formula(const tg_mesh *m);
tg_coord tg_mesh_coord(const tg_mesh *m, int rank);

const char *tg_group_name(tg_group g);            /* "row", "col", "dep", "coldep", "world" */
int tg_group_size(const tg_mesh *m, tg_group g);  /* q, q, d, q*d, p (megatron: 1, 1, 1, 1, p) */
int tg_group_local(const tg_mesh *m, tg_group g, tg_coord c); /* index of c inside its group */
int tg_group_color(const tg_mesh *m, tg_group g, tg_coord c); /* which group of kind g holds c */
/* The groups a scheme's ranks use: row, col, dep, coldep on the [q,q,d] mesh; world for megatron. */
int tg_group_used(const tg_mesh *m, tg_group g);
/* Global rank of the member with local index `local` of the group of kind g that holds c. */
int tg_group_member(const tg_mesh *m, tg_group g, tg_coord c, int local);
/* "row(1,0)", "col(2,1)", "dep(0,1)", "coldep(3)", "world" for the group of kind g holding c. */
void tg_group_label(const tg_mesh *m, tg_group g, tg_coord c, char *buf, int len);

/* The mesh as people read it: "[2,2,1]" or "megatron p=4". */
void tg_mesh_text(const tg_mesh *m, char *buf, int len);

/* Activation row block held by c: h = i + q*k (megatron: 0, every rank holds every token). */
int tg_mesh_row_block(const tg_mesh *m, tg_coord c);

#endif
