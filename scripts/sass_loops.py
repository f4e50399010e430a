"""Summarize the loops of a kernel's SASS (nvdisasm's output): for each backward branch, the
instructions between its target label and the branch, counted by opcode, biggest loop first.

    python3 scripts/sass_loops.py kernel.sass [--top N] [--whole]

A product kernel's loop along `k` is the one with the most FFMA; what else it issues (shared
memory reads LDS, global reads LDG, stores STS, barriers BAR, integer and address work) is
the overhead each step pays beside its multiply-adds. `--whole` counts the whole kernel by
opcode too, for kernels with no loop to speak of (attention's weights, unrolled)."""
import collections
import re
import sys

LABEL = re.compile(r"^(\.L_x_\d+):")
INSTR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
BRANCH = re.compile(r"\bBRA\b.*?(\.L_x_\d+)")


def parse(lines):
    """The kernel's instructions as (index, opcode, text) and each label's next index."""
    instrs, labels = [], {}
    for line in lines:
        m = LABEL.match(line.strip())
        if m:
            labels[m.group(1)] = len(instrs)
            continue
        m = INSTR.search(line)
        if m:
            instrs.append((len(instrs), m.group(3), line.strip()))
    return instrs, labels


def loops(instrs, labels):
    """(start, end) of each backward branch's body, the branch included."""
    found = []
    for index, opcode, text in instrs:
        if opcode.startswith("BRA"):
            m = BRANCH.search(text)
            if m and m.group(1) in labels and labels[m.group(1)] <= index:
                found.append((labels[m.group(1)], index))
    return found


def main():
    path = sys.argv[1]
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 3
    instrs, labels = parse(open(path).read().splitlines())
    print(f"{path}: {len(instrs)} instructions")
    if "--whole" in sys.argv:
        counts = collections.Counter(op.split(".")[0] for _, op, _ in instrs)
        print("  whole: " + ", ".join(f"{op} {n}" for op, n in counts.most_common()))
    summaries = []
    for start, end in loops(instrs, labels):
        counts = collections.Counter(op.split(".")[0] for _, op, _ in instrs[start : end + 1])
        summaries.append((counts["FFMA"] + counts["FMUL"] + counts["FADD"], start, end, counts))
    summaries.sort(reverse=True)
    for _, start, end, counts in summaries[:top]:
        total = end - start + 1
        ffma = counts["FFMA"]
        print(f"loop at {start}..{end}: {total} instructions, FFMA {ffma} ({100 * ffma / total:.1f}%)")
        print("  " + ", ".join(f"{op} {n}" for op, n in counts.most_common()))


if __name__ == "__main__":
    main()
