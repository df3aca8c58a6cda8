#!/usr/bin/env python3
"""tests/cuda/sass_audit.py - what the compiled kernels really execute, against what docs/CUDA.md says.

Reads the SASS of CUDA objects (cuobjdump -sass, every architecture in the fat binary) and, per kernel and
architecture, counts FP64 instructions (DADD, DMUL, DFMA, DSETP, DMNMX, double conversions, MUFU.*64H) and tensor
core instructions (HMMA, HGMMA, and the other *MMA). The rules are the table of docs/CUDA.md under the heading
"FP64 and tensor cores in the kernels" (one row a kernel: `| name | fp64 or mma | why |`), so the document and the
check cannot drift apart:

  * a kernel that uses FP64 on any architecture must have an `fp64` row saying why;
  * a kernel with an `mma` row (a matrix kernel written by hand) must use tensor cores on every architecture;
  * a row that matches no audited kernel, or an `fp64` row whose kernel no longer uses FP64, is stale: an error.

A kernel's name is its demangled qualified name without template arguments, parameters and anonymous namespaces
(trk::lm::k_lm_sums, k_grad_sums). Prints one line per kernel (name; per architecture its FP64 and MMA counts; the FP64 opcodes); exits 1
on any violation, naming the kernel, the instructions and the fix. `--self-test` checks the parser and the rules on
a small made-up listing (a check that cannot fail is no check).

usage: sass_audit.py CUOBJDUMP DOC OBJECT...      sass_audit.py --self-test
"""
import re
import subprocess
import sys

HEADING = "FP64 and tensor cores in the kernels"
FP64_BASE = {"DADD", "DMUL", "DFMA", "DSETP", "DMNMX", "DSET", "DRCP"}
CONV = {"F2F", "I2F", "F2I", "FRND"}


def parse_sass(text):
    """{(mangled kernel, arch): [fp64 count, mma count, set of fp64 opcodes]}"""
    out, arch, fn = {}, "?", None
    for line in text.splitlines():
        m = re.match(r"\s*code for (sm_\w+)", line)
        if m:
            arch, fn = m.group(1), None
            continue
        m = re.search(r"Function : (\S+)", line)
        if m:
            fn = m.group(1)
            out.setdefault((fn, arch), [0, 0, set()])
            continue
        m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if not m or fn is None:
            continue
        op = m.group(1)
        base = op.split(".")[0]
        rec = out[(fn, arch)]
        if base in FP64_BASE or (base in CONV and "F64" in op) or (base == "MUFU" and "64" in op):
            rec[0] += 1
            rec[2].add(op)
        if base.endswith("MMA"):
            rec[1] += 1
    return out


def short_name(mangled):
    d = subprocess.run(["c++filt"], input=mangled + "\n", capture_output=True, text=True).stdout.strip() or mangled
    d = d.replace("(anonymous namespace)::", "")
    d = re.sub(r"^void ", "", d)
    depth, name = 0, ""
    for ch in d:  # drop template arguments and the parameter list
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif depth == 0:
            name += ch
    return name.strip()


def parse_rules(doc_text):
    rules, inside = {}, False
    for line in doc_text.splitlines():
        if line.startswith("#"):
            inside = HEADING in line
            continue
        if not inside:
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) >= 3 and cells[1] in ("fp64", "mma"):
            rules[cells[0].strip("`")] = cells[1]
    return rules


def audit(sass, rules):
    """(report lines, error lines)"""
    by_name = {}
    for (fn, arch), rec in sass.items():
        by_name.setdefault(short_name(fn), {}).setdefault(arch, [0, 0, set()])
        acc = by_name[short_name(fn)][arch]
        acc[0] += rec[0]
        acc[1] += rec[1]
        acc[2] |= rec[2]
    report, errors = [], []
    for name in sorted(by_name):
        per_arch = [f"{arch} fp64 {r[0]:3d} mma {r[1]:3d}" for arch, r in sorted(by_name[name].items())]
        ops = sorted(set().union(*(r[2] for r in by_name[name].values())))
        report.append(f"{name:30s} {'; '.join(per_arch)}  {' '.join(ops[:5])}".rstrip())
        uses64 = {a: r for a, r in by_name[name].items() if r[0]}
        rule = rules.get(name)
        if uses64 and rule != "fp64":
            a, r = next(iter(sorted(uses64.items())))
            errors.append(f"{name} uses FP64 ({r[0]} instructions on {a}: {', '.join(sorted(r[2])[:4])}) and "
                          f"docs/CUDA.md \"{HEADING}\" has no fp64 row for it: compute in float, or add the row "
                          f"saying why FP64 is needed")
        if rule == "fp64" and not uses64:
            errors.append(f"docs/CUDA.md \"{HEADING}\": {name} no longer uses FP64: remove its fp64 row")
        if rule == "mma":
            for a, r in sorted(by_name[name].items()):
                if not r[1]:
                    errors.append(f"{name} is a matrix kernel (docs/CUDA.md mma row) without a tensor core "
                                  f"instruction on {a}: use mma/wgmma, or cuBLAS")
    for name in sorted(set(rules) - set(by_name)):
        errors.append(f"docs/CUDA.md \"{HEADING}\": the row for {name} matches no compiled kernel: remove or rename it")
    return report, errors


def self_test():
    text = """
	code for sm_90
		Function : _Z5k_dblPf
        /*0000*/                   DADD R2, R2, R4 ;
        /*0010*/              @!P0 F2F.F32.F64 R1, R2 ;
		Function : _Z5k_mmaPf
        /*0000*/                   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;
		Function : _Z6k_flatPf
        /*0000*/                   FADD R2, R2, R4 ;
"""
    sass = parse_sass(text)
    assert sass[("_Z5k_dblPf", "sm_90")][0] == 2, sass
    assert sass[("_Z5k_mmaPf", "sm_90")][1] == 1, sass
    ok = {"k_dbl": "fp64", "k_mma": "mma"}
    assert audit(sass, ok)[1] == [], audit(sass, ok)[1]
    assert any("uses FP64" in e for e in audit(sass, {})[1])            # undocumented FP64
    assert any("no longer uses FP64" in e for e in audit(sass, {**ok, "k_flat": "fp64"})[1])
    assert any("without a tensor core" in e for e in audit(sass, {**ok, "k_flat": "mma"})[1])
    assert any("matches no compiled kernel" in e for e in audit(sass, {**ok, "k_gone": "fp64"})[1])
    doc = f"# x\n## {HEADING}\n| kernel | rule | why |\n|---|---|---|\n| `k_dbl` | fp64 | because |\n## next\n| `k_x` | fp64 | no |\n"
    assert parse_rules(doc) == {"k_dbl": "fp64"}, parse_rules(doc)
    print("sass_audit: self-test passed")


def main(argv):
    if argv[1:] == ["--self-test"]:
        self_test()
        return 0
    if len(argv) < 4:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    cuobjdump, doc, objs = argv[1], argv[2], argv[3:]
    rules = parse_rules(open(doc, encoding="utf-8").read())
    if not rules:
        print(f"sass_audit: {doc} has no table under \"{HEADING}\"", file=sys.stderr)
        return 1
    sass = {}
    for o in objs:
        r = subprocess.run([cuobjdump, "-sass", o], capture_output=True, text=True)
        if "does not contain device code" in r.stdout + r.stderr:  # a host object among the runtime's
            continue
        if r.returncode != 0:
            print(f"sass_audit: {cuobjdump} -sass {o} failed: {r.stderr.strip()}", file=sys.stderr)
            return 1
        for k, v in parse_sass(r.stdout).items():  # a kernel compiled into two objects counts once
            sass[k] = v
    if not sass:
        print("sass_audit: no kernel found in " + " ".join(objs), file=sys.stderr)
        return 1
    report, errors = audit(sass, rules)
    print("\n".join(report))
    for e in errors:
        print("error: " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
