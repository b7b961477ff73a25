#!/usr/bin/env python3
"""Per-kernel instruction counts from `cuobjdump -sass` listings (static
counts: each instruction of the listing once, loops not unrolled further).

    python3 scripts/sass_counts.py a.sass [b.sass ...]

One line per kernel: total instructions, then HMMA, LDSM, LDGSTS, MUFU.EX2,
BAR, SHFL, STL, LDL (the last two: local memory, i.e. spills or arrays the
compiler could not keep in registers).
"""
import re
import sys

OPS = ["HMMA", "LDSM", "LDGSTS", "MUFU.EX2", "BAR", "SHFL", "STL", "LDL"]
FUNC = re.compile(r"^\s*Function\s*:\s*(\S+)")
INSN = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def short(name):
    """A readable kernel name from the mangled one."""
    m = re.search(r"\d((?:flash_forward(?:_v2)?|softmax_rows(?:_two_pass)?|floor|read_pass|fill_random)_kernel)"
                  r"(?:ILi(\d+)E(?:Li(\d+)E)?(?:Li(\d+)E)?)?", name)
    if not m:
        return name[:60]
    args = [a for a in m.groups()[1:] if a]
    return m.group(1) + ("<" + ",".join(args) + ">" if args else "")


def count(paths):
    kernels = {}
    for path in paths:
        cur = None
        with open(path, errors="replace") as f:
            for line in f:
                fm = FUNC.match(line)
                if fm:
                    cur = kernels.setdefault(short(fm.group(1)), {k: 0 for k in ["total"] + OPS})
                    continue
                im = INSN.search(line)
                if cur is None or not im:
                    continue
                op = im.group(1)
                cur["total"] += 1
                for k in OPS:
                    if op == k or op.startswith(k + "."):
                        cur[k] += 1
    return kernels


def main(argv):
    kernels = count(argv[1:])
    cols = ["total"] + OPS
    print(f"{'kernel':44s} " + " ".join(f"{c:>8s}" for c in cols))
    for name in sorted(kernels):
        print(f"{name:44s} " + " ".join(f"{kernels[name][c]:8d}" for c in cols))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
