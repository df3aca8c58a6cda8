"""tests/ref/streams_rule.py - the CUDA program's stream order, recomputed from a class file of
schedule.json (as tests/ref/schedule_class.py unpacks it) and compared with the file's own stream,
wait, wait_buffers, signal and overlaps fields. It follows the rule as docs/CUDA.md states it, from
the buffers' offsets, sizes and access modes alone, not tessgen's code:

  - collectives (bcast, allreduce, reduce) run on the comm stream, every other step on the compute
    stream;
  - a step's buffers are those its call names: all of them, attention's scores and probabilities
    scratch included (the cuBLAS attention writes them in device memory);
  - two steps conflict when a buffer of one and a buffer of the other share bytes and one of the two
    writes it;
  - within a phase, a step's candidate is the latest earlier step of the other stream it conflicts
    with; it waits for it unless an earlier step of its own stream in the phase already waited for
    that step or a later one (stream order covers it);
  - wait_buffers: the first conflicting pair (this step's buffer, the waited step's), in the order
    the steps list their buffers;
  - signal: some later step waits for it;
  - overlaps: a bcast of SUMMA step t >= 1 names the latest GEMM before it, unless it waits for
    that GEMM or a later step.
"""

COMM = ("bcast", "allreduce", "reduce")


def stream(s):
    return "comm" if s["kind"] in COMM else "compute"


def touched(s):
    """(buffer id, writes) of the buffers the step's call names."""
    return [(b, "w" in acc) for b, acc in s["buffers"]]


def clash(x, y, bufs):
    """The first (x's buffer, y's buffer) sharing bytes with one of the two writing, or None."""
    for bx, wx in touched(x):
        for by, wy in touched(y):
            X, Y = bufs[bx], bufs[by]
            if (wx or wy) and X["offset"] < Y["offset"] + Y["bytes"] and Y["offset"] < X["offset"] + X["bytes"]:
                return [bx, by]
    return None


def expected(C):
    """Per step: (stream, wait, wait_buffers, signal, overlaps) by the rule above."""
    st, bufs = C["steps"], C["buffers"]
    out = []
    start, waited, gemm = 0, {}, None
    for b, s in enumerate(st):
        if b == 0 or st[b - 1]["phase"] != s["phase"]:
            start, waited = b, {"comm": -1, "compute": -1}
        wait = pair = None
        for a in range(b - 1, start - 1, -1):
            if stream(st[a]) != stream(s):
                pair = clash(s, st[a], bufs)
                if pair:
                    if a > waited[stream(s)]:
                        wait = a
                        waited[stream(s)] = a
                    else:
                        pair = None
                    break
        over = None
        if s["kind"] == "bcast" and s["t"] is not None and s["t"] >= 1 and gemm is not None:
            if wait is None or wait < gemm:
                over = gemm
        if s["kind"] == "gemm":
            gemm = b
        out.append([stream(s), wait, pair, 0, over])
    for row in out:
        if row[1] is not None:
            out[row[1]][3] = 1
    return out


def check(C, label):
    """Problems (strings) where the class file's fields differ from the rule; [] when none."""
    bad = []
    for s, want in zip(C["steps"], expected(C)):
        got = [s["stream"], s["wait"], s["wait_buffers"], s["signal"], s["overlaps"]]
        if got != want:
            bad.append("%s step %d (%s): stream, wait, wait_buffers, signal, overlaps = %s; the rule says %s"
                       % (label, s["step"], s["kind"], got, want))
    return bad
