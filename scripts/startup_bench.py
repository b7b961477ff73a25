#!/usr/bin/env python3
"""Start-up cost of hbmscope builds side by side: wall time and peak RSS of
short commands (`--version`, the default `model`), each run many times.

    scripts/startup_bench.py BASELINE_BIN OTHER_BIN... [--runs N]

The first binary is the baseline (e.g. a -DHBMSCOPE_CUDA=OFF build); every
other row shows its ratio to it. The target for a CUDA build's model path:
at most 1.5x the baseline's mean wall time and at most 20 MiB more peak RSS
(the CUDA backend is a plugin loaded only by `measure`).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

COMMANDS = [["--version"], ["model"], ["model", "--seq", "1K:64K:x2", "--head-dim", "64,128", "--format", "json"]]

# A child's peak RSS counts the memory of whatever process forked it (Linux
# keeps the high-water mark across fork and exec), so a Python parent would
# add its own ~15 MiB to every figure. A tiny C launcher forks instead.
LAUNCHER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
int main(int argc, char** argv) {
  int runs = atoi(argv[1]);
  for (int i = 0; i < runs; ++i) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pid_t pid = fork();
    if (pid == 0) {
      int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      dup2(null, 2);
      execv(argv[2], argv + 2);
      _exit(127);
    }
    int status;
    struct rusage ru;
    wait4(pid, &status, 0, &ru);
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
    printf("%.9f %ld\n", (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9, ru.ru_maxrss);
  }
  return 0;
}
"""


def build_launcher(tmp):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        sys.exit("startup_bench: needs a C compiler (cc) for its launcher")
    src = os.path.join(tmp, "launch.c")
    exe = os.path.join(tmp, "launch")
    with open(src, "w") as f:
        f.write(LAUNCHER)
    subprocess.run([cc, "-O2", "-o", exe, src], check=True)
    return exe


def measure(launcher, binary, args, runs):
    out = subprocess.run([launcher, str(runs), os.path.abspath(binary)] + args, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"startup_bench: {binary} {' '.join(args)} failed")
    samples = [line.split() for line in out.stdout.splitlines()]
    return [(float(w), int(r) / 1024.0) for w, r in samples]  # seconds, MiB


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--runs", type=int, default=40)
    a = ap.parse_args()
    base = {}
    print(f"{'binary':<40} {'command':<60} {'mean wall':>12} {'peak RSS':>10}  vs first")
    with tempfile.TemporaryDirectory() as tmp:
        launcher = build_launcher(tmp)
        for i, b in enumerate(a.binaries):
            for cmd in COMMANDS:
                measure(launcher, b, cmd, 3)  # warm the page cache
                samples = measure(launcher, b, cmd, a.runs)
                # The mean, not the median: some virtual machines' clocks tick in
                # 4 ms steps, and the mean of such samples still resolves less.
                wall = statistics.mean(s[0] for s in samples)
                rss = max(s[1] for s in samples)
                key = " ".join(cmd)
                note = ""
                if i == 0:
                    base[key] = (wall, rss)
                else:
                    w0, r0 = base[key]
                    ok = wall <= 1.5 * w0 and rss <= r0 + 20
                    note = f"{wall / w0:.2f}x, {rss - r0:+.1f} MiB ({'MET' if ok else 'MISSED'}: <= 1.5x, <= +20 MiB)"
                print(f"{b:<40} {'hbmscope ' + key:<60} {wall * 1e3:>9.1f} ms {rss:>6.1f} MiB  {note}")


if __name__ == "__main__":
    main()
