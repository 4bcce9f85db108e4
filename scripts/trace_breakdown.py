#!/usr/bin/env python3
"""Where an inference's modeled cycles go, from `tinycoral run --device sim --trace FILE`.

Usage: trace_breakdown.py TRACE [--program N] [--top K]

The trace has one line per executed instruction with the clock's start and finish cycles
(docs/chip.md "Clock"). For the last program in the trace (the inference; --program picks another)
this prints:
- the cycles during which some tile runs an op, and the rest (no op anywhere) split by the units
  that were busy meanwhile (ring, DMA, mesh: hand-overs, parameter streams, the host's image);
- each op instruction in program order (one line per instruction word, all the tiles that ran
  it): its tiles, first start and last finish, the tiles' summed op cycles, and the cycles since
  the previous op instruction ended in which no op ran (the gap it waited through);
- the K largest gaps.
Works the same on Google's programs and ours, so the two can be set side by side per layer.
"""
import argparse
import collections
import sys


def read(path, program):
    rows = []
    with open(path) as f:
        for line in f:
            if line.startswith('#'):
                continue
            p = line.split()
            if len(p) < 7:
                sys.exit(f'{path}: no clock columns (a trace from an older tinycoral?)')
            rows.append((int(p[0]), int(p[1]), p[2], p[3], p[4], int(p[5]), int(p[6])))
    if not rows:
        sys.exit(f'{path}: empty trace')
    if program is None:
        program = max(r[0] for r in rows)
    return program, [r for r in rows if r[0] == program]


def union(intervals):
    out = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def covered(merged, a, b):
    """Cycles of [a, b) inside the merged intervals."""
    return sum(max(0, min(b, y) - max(a, x)) for x, y in merged)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('trace')
    ap.add_argument('--program', type=int)
    ap.add_argument('--top', type=int, default=10)
    a = ap.parse_args()
    program, rows = read(a.trace, a.program)
    end = max(r[6] for r in rows)
    ops = collections.OrderedDict()
    by_unit = collections.defaultdict(list)
    for _, word, _, tile, unit, start, finish in rows:
        if unit == 'scalar' or finish <= start:
            continue
        kind = ('op' if unit == 'op' else 'ring' if unit.startswith('ring') else
                'mesh' if unit.startswith('mesh') else 'dma')
        by_unit[kind].append((start, finish))
        if unit == 'op':
            o = ops.setdefault(word, {'tiles': set(), 'start': start, 'end': finish, 'busy': 0})
            o['tiles'].add(tile)
            o['start'] = min(o['start'], start)
            o['end'] = max(o['end'], finish)
            o['busy'] += finish - start
    op_time = union(by_unit['op'])
    op_cycles = sum(b - a for a, b in op_time)
    gaps = []
    t = 0
    for x, y in op_time:
        if x > t:
            gaps.append((t, x))
        t = y
    if end > t:
        gaps.append((t, end))
    merged = {k: union(v) for k, v in by_unit.items() if k != 'op'}
    print(f'program {program}: {end} cycles ({end / 250e3:.3f} ms at 250 MHz), '
          f'{len(ops)} op instructions')
    print(f'  some op running: {op_cycles} cycles ({100 * op_cycles / end:.1f}%)')
    idle = end - op_cycles
    print(f'  no op running:   {idle} cycles, of which busy (overlapping):', ', '.join(
        f'{k} {sum(covered(m, x, y) for x, y in gaps)}' for k, m in sorted(merged.items())))
    print('\n  word   tiles  start      end        wall     busy(sum)  gap_before')
    last_end = 0
    for word, o in ops.items():
        gap = sum(max(0, min(o['start'], y) - max(last_end, x)) for x, y in gaps)
        print(f'  {word:<6} {len(o["tiles"]):>5}  {o["start"]:<10} {o["end"]:<10} '
              f'{o["end"] - o["start"]:<8} {o["busy"]:<10} {gap}')
        last_end = max(last_end, o['end'])
    print(f'\n  largest gaps (no op on any tile), with the busy units:')
    for x, y in sorted(gaps, key=lambda g: g[0] - g[1])[:a.top]:
        busy = ', '.join(f'{k} {covered(m, x, y)}' for k, m in sorted(merged.items()))
        print(f'  {x:>9}-{y:<9} {y - x:>7} cycles  {busy}')


if __name__ == '__main__':
    main()
