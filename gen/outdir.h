/*
 * outdir.h - the output directory as a whole: checked before any work, held
 * by one tessgen at a time, and cleaned of what an earlier generation wrote
 * and this one does not.
 *
 *   - tg_outdir_check runs before planning: the path is not empty, not a
 *     dangling symbolic link, a directory (or creatable as one) and writable,
 *     so a bad -o fails in milliseconds with a message, not after the work.
 *   - tg_outdir_lock takes an exclusive flock on DIR/.tessgen.lock; a second
 *     tessgen on the same directory stops at once, naming the first's pid.
 *     Files are still each written atomically (outfile.c), and every program
 *     carries the schedule fingerprint that the runtime checks, so even a
 *     directory left half-updated by a crash is refused at start, never run.
 *   - DIR/.tessgen-files lists every file tessgen wrote there. Before writing,
 *     the list becomes old + new; after, files of the old list that the new
 *     generation does not write are removed, then the list becomes the new
 *     set. Only listed files (and rank_NNNN.c/.cu of tessgen 0.1's layout)
 *     are ever removed, and only when their first bytes say tessgen made them:
 *     a user's file is never touched, whatever its name.
 *   - Temporary files NAME.tmp.PID that a killed tessgen left (PID no longer
 *     running, NAME a listed file) are removed while the lock is held.
 */
#ifndef TG_OUTDIR_H
#define TG_OUTDIR_H

#include <stdbool.h>

#include "err.h"

/* Can dir be used as an output directory? (It is not created here.) */
bool tg_outdir_check(const char *dir, tg_err *err);

/* Create dir (and parents) and lock it; *fd keeps the lock until tg_outdir_unlock. */
bool tg_outdir_lock(const char *dir, int *fd, tg_err *err);
void tg_outdir_unlock(int fd);

/* The set of files one generation writes, relative to the output directory. */
typedef struct tg_filelist {
    char **name;
    int n, cap;
    bool sorted; /* tg_filelist_sort: lookups by binary search */
} tg_filelist;

void tg_filelist_init(tg_filelist *l);
void tg_filelist_free(tg_filelist *l);
bool tg_filelist_add(tg_filelist *l, const char *name); /* false: out of memory */
bool tg_filelist_has(const tg_filelist *l, const char *name);
void tg_filelist_sort(tg_filelist *l); /* sort, drop repeats; until the next add, lookups are O(log n) */

/* Read DIR/.tessgen-files (an empty list when there is none). */
bool tg_outdir_read_list(const char *dir, tg_filelist *old, tg_err *err);
/* Write DIR/.tessgen-files atomically: the names of a, then those of b not in a (b may be NULL). */
bool tg_outdir_write_list(const char *dir, const tg_filelist *a, const tg_filelist *b, tg_err *err);
/* Remove temporary files of dead tessgen processes next to listed files. */
void tg_outdir_clean_tmp(const char *dir, const tg_filelist *old, const tg_filelist *now, int quiet);
/* Remove the files of old (and legacy rank_NNNN.c/.cu) that now does not hold and that tessgen made. */
void tg_outdir_remove_stale(const char *dir, const tg_filelist *old, const tg_filelist *now, int quiet);

/* Can the file system of dir (or of its nearest existing parent, when dir does not exist yet) hold need more
 * bytes, counting the bytes of now's files already in dir as free (they are replaced)? *avail gets what it
 * counts as free. TESS_TEST_DISK_FREE=BYTES replaces statvfs's free bytes, so that the refusal is testable
 * without filling a disk. false with a message naming the sizes and the fix. */
bool tg_outdir_room(const char *dir, const tg_filelist *now, unsigned long long need, unsigned long long *avail,
                    tg_err *err);

#endif
