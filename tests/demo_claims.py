#!/usr/bin/env python3
"""The claims the README makes of the demo's output, checked on an output as a user's CPU
prints it: the digits move from CPU to CPU (docs/kernel-spread.md), the claims must not.

    demo_claims.py [--blocks SINK,RATE,TEXT] FILE...

Each FILE is what tools/demo, tutorial 06 (part a) or tutorial 07 printed; every block of
them that this knows is checked:

  the sink         each "1-layer 1-head model, seed N" table (tutorial 06, (a3)): the baseline's
                   idle queries put >= 0.4 of their attention on BOS, G1's <= 0.1; G1's gate is
                   <= 0.05 on them and >= 0.5 where it copies; the baseline's value at BOS is
                   under half as long as at the other tokens (the drain)
  the rate         the four runs of each seed at lr 1e-01 (tutorial 07): the baseline ends worst,
                   G1 below it, QK-norm and G1 + QK-norm below G1; the baseline's and G1's
                   largest attention logit end above 1e4 with a head collapsed (smallest
                   entropy < 0.01), the QK-norm variants' below 1e3
  natural text     the "mean first-token share" of each attention-sink report (tools/demo part 3):
                   under 0.05, no sink head

--blocks: the files must hold that many blocks of each (a whole demo: 1,1,2; tutorial 06's
five seeds and 07's two: 5,2,0), else that is a failure too; without it, at least one. Prints
one line per claim and seed with the numbers it rests on; exits 1 if any fails.
"""
import re
import sys

SINK_HEADER = re.compile(r"^1-layer 1-head model, seed (\d+), ")
RUN = re.compile(r"^\s+(baseline|QK-norm|G1|G1 \+ QK-norm)\s+lr 1e-01 seed (\d+): val loss ([\d.]+), "
                 r"largest attention logit\s+([\d.e+]+), smallest entropy ([\d.e+-]+)")
SHARE = re.compile(r"^mean first-token share ([\d.]+); sink layers \d+ of \d+; sink heads \(alpha > [\d.]+\) (\d+) of")


def row(block, label):
    """The numbers of the table row starting with label (a '-' counts as None)."""
    for line in block:
        if line.strip().startswith(label):
            return [None if v == "-" else float(v) for v in line.strip()[len(label):].split()]
    raise ValueError(f"no row '{label}'")


def sink_tables(text):
    """{seed: lines of its table}."""
    tables, seed = {}, None
    for line in text.splitlines():
        if (m := SINK_HEADER.match(line)):
            seed = int(m.group(1))
            tables[seed] = []
        elif seed is not None:
            if not line.strip():
                seed = None
            else:
                tables[seed].append(line)
    return tables


def check_sink(seed, table, report):
    base, g1 = row(table, "alpha (on BOS), non-trigger queries")
    _, gate_idle = row(table, "G1 mean gate, non-trigger queries")
    _, gate_copy = row(table, "G1 mean gate, trigger queries")
    v_bos, _ = row(table, "|v| at BOS")
    v_other, _ = row(table, "|v| at other tokens (mean)")
    report(f"sink, seed {seed}: baseline alpha {base} >= 0.4, G1 alpha {g1} <= 0.1", base >= 0.4 and g1 <= 0.1)
    report(f"sink, seed {seed}: G1 gate {gate_idle} <= 0.05 on idle queries, {gate_copy} >= 0.5 where it copies",
           gate_idle <= 0.05 and gate_copy >= 0.5)
    report(f"sink, seed {seed}: baseline |v| at BOS {v_bos} < half of {v_other} at other tokens", v_bos < v_other / 2)


def check_rate(seed, runs, report):
    loss = {variant: run[0] for variant, run in runs.items()}
    ordered = loss["baseline"] > loss["G1"] > max(loss["QK-norm"], loss["G1 + QK-norm"])
    report(f"rate, seed {seed}: final loss baseline {loss['baseline']} > G1 {loss['G1']} > QK-norm "
           f"{loss['QK-norm']}, G1 + QK-norm {loss['G1 + QK-norm']}", ordered)
    for variant, (_, logit, entropy) in runs.items():
        if "QK-norm" in variant:
            report(f"rate, seed {seed}: {variant}'s largest logit {logit:g} < 1e3", logit < 1e3)
        else:
            report(f"rate, seed {seed}: {variant}'s largest logit {logit:g} > 1e4, smallest entropy {entropy} < 0.01",
                   logit > 1e4 and entropy < 0.01)


def main(argv):
    wanted = None
    if argv[:1] == ["--blocks"] and len(argv) > 1:
        wanted, argv = [int(n) for n in argv[1].split(",")], argv[2:]
    files = argv
    if not files or any(f.startswith("-") for f in files) or (wanted is not None and len(wanted) != 3):
        sys.exit(__doc__)
    failures, found = [], {"sink": 0, "rate": 0, "natural text": 0}

    def report(line, ok):
        print(("ok      " if ok else "FAILED  ") + line)
        if not ok:
            failures.append(line)

    for path in files:
        text = open(path, encoding="utf-8", errors="replace").read()
        for seed, table in sorted(sink_tables(text).items()):
            check_sink(seed, table, report)
            found["sink"] += 1
        runs = {}
        for line in text.splitlines():
            if (m := RUN.match(line)):
                runs.setdefault(int(m.group(2)), {})[m.group(1)] = tuple(float(m.group(i)) for i in (3, 4, 5))
        for seed, variants in sorted(runs.items()):
            if len(variants) == 4:
                check_rate(seed, variants, report)
                found["rate"] += 1
        reports = text.split("\n-- attention-sink report:\n")[1:]  # tools/demo part 3: one per model
        for line in (line for report_text in reports for line in report_text.splitlines()):
            if (m := SHARE.match(line)):
                share, heads = float(m.group(1)), int(m.group(2))
                report(f"natural text: mean first-token share {share} < 0.05, {heads} sink heads", share < 0.05 and heads == 0)
                found["natural text"] += 1
    if wanted is not None:
        for part, count in zip(found, wanted):
            report(f"the output holds {count} {part} block(s): {found[part]}", found[part] == count)
    elif not any(found.values()):
        report("the files hold a block this knows", False)
    print(f"{len(failures)} claims failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
