"""Where the time goes, from py-spy's collapsed stacks (``--format raw``): the functions
with the most samples on top of the stack (self) and anywhere in it (total).

    bench/run --system cronwheel-pg --workload W1  (with CWBENCH_PROFILE=/tmp/prof)
    python bench/profile_top.py /tmp/prof/cronwheel-pg-W1-0.txt
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

# py-spy frames read "function (path/to/module.py:line)"; the line is dropped so a
# function's samples add up across its lines.
FRAME = re.compile(r"^(?P<fn>.*?) \((?P<file>[^:()]+)(?::\d+)?\)$")


def _name(frame: str) -> str:
    m = FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    return f"{m['fn']} ({'/'.join(Path(m['file']).parts[-2:])})"


def summarize(path: Path, top: int) -> None:
    """py-spy records only threads that are running (not waiting) unless told --idle, so
    every sample here is CPU work."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [_name(f) for f in stack.split(";")]
        n = int(count)
        samples += n
        own[frames[-1]] += n
        for f in set(frames):
            total[f] += n
    print(f"{path.name}: {samples} samples")
    for title, counter in (("self", own), ("total", total)):
        print(f"  top {top} by {title}:")
        for fn, n in counter.most_common(top):
            print(f"    {100 * n / max(samples, 1):5.1f}%  {fn}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--top", type=int, default=25)
    a = p.parse_args()
    for f in a.files:
        summarize(f, a.top)


if __name__ == "__main__":
    main()
