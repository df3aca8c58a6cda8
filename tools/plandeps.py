#!/usr/bin/env python3
"""tools/plandeps.py - the planner's files depend on each other one way only.

The planner (gen/plan*.c) is layered: the top (plan.c) picks a scheme, the scheme planners
(plan_tesseract.c, plan_megatron.c and their language-model parts plan_lm.c, plan_megatron_lm.c)
call the shared step sequences (plan_steps.c), and everything calls the builder (plan_builder.c),
which calls none of them (docs/ARCHITECTURE.md, "The planner's layers"). This check derives the
graph from the sources and fails when it has a cycle, so a scheme cannot quietly start calling back
up into the file that calls it.

How: in each file, comments, string and character literals and preprocessor lines are blanked;
a function definition is a name followed by a parameter list and a body at the file's top level,
and it is external unless declared static. File A depends on file B when A's code names a function
B defines externally: a call, or the function's name taken as a value (a function pointer or a
table of them is a dependency like a call). A cycle is reported as the chain of files with, for
each edge, one function that makes it, and the exit status is 1.

Usage: tools/plandeps.py [--graph] [FILE.c ...]   (default: gen/plan*.c of this checkout)
       tools/plandeps.py --self-test               (shows on fixtures that a cycle is found)
--graph prints every edge (file -> file: functions). Standard library only.
"""
import glob
import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do", "else", "case", "_Alignof", "__attribute__"}


def strip(src):
    """The source with comments, literals and preprocessor lines replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(src)
    line_start = True
    while i < n:
        c = src[i]
        if line_start and c == "#":
            # a preprocessor line, with its continuations
            while i < n and src[i] != "\n":
                if src[i] == "\\" and i + 1 < n and src[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
            continue
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        if c in "\"'":
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else " ")
            i = j
            line_start = False
            continue
        out.append(c)
        if c == "\n":
            line_start = True
        elif not c.isspace():
            line_start = False
        i += 1
    return "".join(out)


def definitions(code):
    """{name: is_static} of the functions the stripped code defines at its top level."""
    defs = {}
    depth = 0
    stmt = []  # text of the current top-level declaration
    for k, c in enumerate(code):
        if depth == 0:
            if c == "{":
                head = "".join(stmt)
                m = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(([^()]|\([^()]*\))*\)\s*$", head)
                if m and m.group(1) not in KEYWORDS and "=" not in head.split(m.group(1))[0]:
                    defs[m.group(1)] = re.search(r"\bstatic\b", head) is not None
                stmt = []
                depth = 1
            elif c == ";":
                stmt = []
            else:
                stmt.append(c)
        else:
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
    return defs


def graph(files):
    """(edges, names): edges[a][b] = sorted functions of b that a names; names: the files' short names."""
    code = {}
    for f in files:
        with open(f, encoding="utf-8") as fh:
            code[f] = strip(fh.read())
    owner, defs = {}, {}
    for f in files:
        defs[f] = definitions(code[f])
        for name, static in defs[f].items():
            if not static:
                owner[name] = f
    edges = {f: {} for f in files}
    for f in files:
        for ident in set(IDENT.findall(code[f])):
            g = owner.get(ident)
            if g is not None and g != f and ident not in defs[f]:  # a file's own (static) function shadows
                edges[f].setdefault(g, []).append(ident)
    for f in files:
        for g in edges[f]:
            edges[f][g].sort()
    return edges


def find_cycle(edges):
    """One cycle as a list of files [a, b, ..., a], or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = {f: WHITE for f in edges}
    stack = []

    def visit(f):
        colour[f] = GREY
        stack.append(f)
        for g in sorted(edges[f]):
            if colour[g] == GREY:
                return stack[stack.index(g):] + [g]
            if colour[g] == WHITE:
                c = visit(g)
                if c:
                    return c
        stack.pop()
        colour[f] = BLACK
        return None

    for f in sorted(edges):
        if colour[f] == WHITE:
            c = visit(f)
            if c:
                return c
    return None


def check(files, show_graph=False, out=sys.stdout):
    edges = graph(files)
    rel = lambda f: os.path.relpath(f, ROOT) if os.path.isabs(f) and f.startswith(ROOT) else f
    if show_graph:
        for f in sorted(edges):
            for g in sorted(edges[f]):
                print("%s -> %s: %s" % (rel(f), rel(g), ", ".join(edges[f][g])), file=out)
    cycle = find_cycle(edges)
    if cycle:
        chain = []
        for a, b in zip(cycle, cycle[1:]):
            chain.append("%s calls %s of %s" % (rel(a), edges[a][b][0], rel(b)))
        print("plandeps: the planner's files call each other in a cycle: %s; move the function that the lower "
              "file needs below it (the builder or the shared steps) so that calls run one way "
              "(docs/ARCHITECTURE.md, \"The planner's layers\")" % "; ".join(chain), file=out)
        return 1
    nedges = sum(len(v) for v in edges.values())
    print("plandeps: %d files, %d dependencies, no cycle" % (len(files), nedges), file=out)
    return 0


FIXTURE = {
    # b.c calls back into a.c through a function pointer only: still a cycle a -> b -> a
    "cycle": {
        "a.c": "#include \"x.h\"\nint a_top(void) { return b_mid(1); }\nint a_cb(int x) { return x; }\n",
        "b.c": "typedef int (*fn)(int);\nstatic fn table[] = { a_cb };\nint b_mid(int x) { return table[0](x); }\n",
    },
    # a three-file cycle a -> b -> c -> a
    "cycle3": {
        "a.c": "int a1(void) { return b1(); }\n",
        "b.c": "int b1(void) { return c1(); }\n",
        "c.c": "int a1(void);\nint c1(void) { return a1() + d1(); }\n",
        "d.c": "int d1(void) { return 0; }\n",
    },
    # one way only: names in comments, strings and static functions of the same name are no dependency
    "acyclic": {
        "a.c": "int a_top(void) { return b_mid(1); }\n",
        "b.c": "/* a_top calls this */\nstatic int a_top2(void) { return 0; }\n"
               "int b_mid(int x) { const char *s = \"a_top\"; (void)s; return x + a_top2(); }\n",
        "c.c": "static int a_top(void) { return 1; }\nint c_use(void) { return a_top(); }\n",
    },
}


def self_test():
    ok = True
    with tempfile.TemporaryDirectory() as d:
        for name, files in FIXTURE.items():
            paths = []
            for fn, text in files.items():
                p = os.path.join(d, name + "_" + fn)
                with open(p, "w", encoding="utf-8") as fh:
                    fh.write(text)
                paths.append(p)

            class Sink:
                text = ""

                def write(self, s):
                    self.text += s

            sink = Sink()
            rc = check(sorted(paths), out=sink)
            msg = sink.text.replace(d + os.sep, "")
            if name == "cycle":
                good = rc == 1 and "cycle_a.c calls b_mid of cycle_b.c" in msg and \
                    "cycle_b.c calls a_cb of cycle_a.c" in msg
            elif name == "cycle3":
                good = rc == 1 and "cycle3_d.c" not in msg and \
                    "cycle3_a.c calls b1 of cycle3_b.c; cycle3_b.c calls c1 of cycle3_c.c; " \
                    "cycle3_c.c calls a1 of cycle3_a.c" in msg
            else:
                good = rc == 0 and "3 files, 1 dependencies, no cycle" in msg
            print("%s %s: %s" % ("ok" if good else "FAILED", name, msg.strip()))
            ok = ok and good
    return 0 if ok else 1


def main(argv):
    args = argv[1:]
    if "--self-test" in args:
        return self_test()
    show = "--graph" in args
    files = [a for a in args if not a.startswith("--")]
    if not files:
        files = sorted(glob.glob(os.path.join(ROOT, "gen", "plan*.c")))
    if not files:
        print("plandeps: no gen/plan*.c under %s" % ROOT, file=sys.stderr)
        return 2
    return check(files, show)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
