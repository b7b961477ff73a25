#!/usr/bin/env python3
"""Do the register counts in src/cuda/launch_plan.cpp (which decide the CTAs
per SM of the L2 simulation and docs/cuda.md's tables) match what ptxas
reported in this build? One line, for the device check's build step.

    python3 scripts/ptxas_check.py results/ptxas.txt src/cuda/launch_plan.cpp

ptxas.txt: the build step's extract, a mangled kernel name then its
"N bytes stack frame" and "Used N registers" lines.
"""
import re
import sys


def main(ptxas_path, plan_path):
    table = {}
    for m in re.finditer(r"\{\{(\d+), (\d+), (\d+), ([12])\}, (\d+)\}", open(plan_path).read()):
        d, br, bc, ver, regs = map(int, m.groups())
        table[(d, br, bc, ver)] = regs
    built, kernel = {}, None
    for line in open(ptxas_path):
        k = re.match(r"_ZN8hbmscope5flash\d+flash_forward(_v2)?_kernelILi(\d+)ELi(\d+)ELi(\d+)E", line.strip())
        if k:
            kernel = (int(k.group(2)), int(k.group(3)), int(k.group(4)), 2 if k.group(1) else 1)
            continue
        r = re.search(r"Used (\d+) registers", line)
        if r and kernel:
            built[kernel] = int(r.group(1))
            kernel = None
    name = "PTXAS REGISTERS = launch_plan.cpp (CTAs/SM of the L2 simulation)"
    if not built:
        print(f"{name}: NOT MEASURED (no flash kernel in the ptxas report)")
        return 0
    wrong = [f"{k}: ptxas {v}, table {table.get(k)}" for k, v in sorted(built.items()) if table.get(k) != v]
    missing = [str(k) for k in sorted(table) if k not in built]
    if wrong:
        print(f"{name}: MISSED ({'; '.join(wrong)})")
    else:
        extra = f"; not in this report: {', '.join(missing)}" if missing else ""
        print(f"{name}: MET ({len(built)} flash instantiations agree{extra})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
