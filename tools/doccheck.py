#!/usr/bin/env python3
"""tools/doccheck.py - the documents a user reads point only at what a clone of this repository has.

For every Markdown file given (default: README.md, docs/*.md and the README.md files under data/,
specs/, tests/, bench/), check that
  * every relative link [text](path#anchor) names a file or folder inside the repository, and its
    #anchor (if any) is a heading of that Markdown file, as GitHub forms heading anchors;
  * no text points outside the repository (`../shared/...`, absolute paths into a workstation);
  * no prose cites the project's internal issue numbers ("issue 12", "(issue 10.4)"): users have no
    access to them. Check names quoted in backticks (what tests/run.sh prints) are exempt.
  * the README's status table exists (a "## Status" heading followed by a table).
Prints one line per problem (file:line: what; fix) and exits 1 if there is any. Standard library only.
Usage: tools/doccheck.py [--root DIR] [FILE.md ...]   (--root: the repository the links must stay in)
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINK = re.compile(r"(?<!!)\[([^\]]*)\]\(([^)\s]+)\)")
IMG = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
ISSUE = re.compile(r"\bissues?\s+\d+(\.\d+)?\b|\*\(\d+\.\d+\)\*", re.I)
OUTSIDE = re.compile(r"\.\./shared\b|/work/|/home/[a-z]")


def default_files():
    out = [os.path.join(ROOT, "README.md")]
    docs = os.path.join(ROOT, "docs")
    out += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    for sub in ("data", "specs", "tests", "bench", "scripts"):
        base = os.path.join(ROOT, sub)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d not in ("tiny", "corpus", "golden"))
            if "README.md" in filenames:
                out.append(os.path.join(dirpath, "README.md"))
    return out


def slug(text):
    """GitHub's heading anchor: lower case, markup dropped, spaces to '-', other punctuation dropped."""
    text = re.sub(r"`([^`]*)`", r"\1", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.strip().lower()
    out = []
    for ch in text:
        if ch.isalnum() or ch in "-_":
            out.append(ch)
        elif ch == " ":
            out.append("-")
    return "".join(out)


def anchors(path, cache={}):
    if path not in cache:
        seen = {}
        found = set()
        in_code = False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("```"):
                    in_code = not in_code
                    continue
                m = None if in_code else HEADING.match(line)
                if m:
                    a = slug(m.group(2))
                    n = seen.get(a, 0)
                    seen[a] = n + 1
                    found.add(a if n == 0 else "%s-%d" % (a, n))
        cache[path] = found
    return cache[path]


def strip_code_spans(line):
    return re.sub(r"`[^`]*`", "``", line)


def check(path, problems):
    rel = os.path.relpath(path, ROOT)
    here = os.path.dirname(path)
    in_code = False
    status_seen = False
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines, 1):
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        if rel == "README.md" and line.strip() == "## Status":
            nxt = [l for l in lines[n:n + 6] if l.strip()]
            status_seen = any(l.startswith("|") for l in nxt)
        prose = strip_code_spans(line)
        for m in LINK.finditer(prose) or ():
            target = m.group(2)
            if re.match(r"^[a-z]+:", target) or target.startswith("mailto:"):
                continue
            file_part, _, anchor = target.partition("#")
            dest = path if not file_part else os.path.normpath(os.path.join(here, file_part))
            if not dest.startswith(ROOT + os.sep) and dest != ROOT:
                problems.append("%s:%d: link %s leaves the repository; link a file of the repository" % (rel, n, target))
                continue
            if not os.path.exists(dest):
                problems.append("%s:%d: link %s names %s, which does not exist; fix the path" %
                                (rel, n, target, os.path.relpath(dest, ROOT)))
                continue
            if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                problems.append("%s:%d: link %s: %s has no heading with anchor #%s; link an existing heading" %
                                (rel, n, target, os.path.relpath(dest, ROOT), anchor))
        if OUTSIDE.search(line):
            problems.append("%s:%d: points outside the repository (%s); refer to a file in the repository" %
                            (rel, n, OUTSIDE.search(line).group(0)))
        m = ISSUE.search(prose)
        if m:
            problems.append("%s:%d: cites an internal issue number (%r); say what it is instead" % (rel, n, m.group(0)))
    if rel == "README.md" and not status_seen:
        problems.append("README.md: no '## Status' heading followed by a table; the README starts with the status")


def main(argv):
    global ROOT
    args = argv[1:]
    if args[:1] == ["--root"] and len(args) >= 2:
        ROOT = os.path.abspath(args[1])
        args = args[2:]
    files = [os.path.abspath(a) for a in args] or default_files()
    problems = []
    for p in files:
        check(p, problems)
    for p in problems:
        print(p)
    print("doccheck: %d files, %d problems" % (len(files), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
