#!/usr/bin/env python3
"""stormdiff.py OLD.md NEW.md: compares two storm.md files (cmd/storm -format
markdown) row by row and prints, per strategy, the largest change of success
(points) and load, and how many rows' harm went from 0 to more or back.

A virtual run is repeatable byte for byte for a seed (resilient-pushback's
rows and sockets runs excepted), so a change between two runs of one seed is
the code's; read a strategy's change against the anchors' and none's, whose
code a change of the root package does not touch."""
import collections
import sys


def parse(path):
    rows, sec, hdr = {}, None, None
    for line in open(path):
        if line.startswith('####'):
            sec, hdr = line.strip('# \n'), None
            continue
        if not line.startswith('|'):
            continue
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if hdr is None:
            hdr = cells
            continue
        if set(cells[0]) <= set('-:'):
            continue
        row = dict(zip(hdr, cells))
        rows[(sec, row.get('p', ''), row.get('strategy', ''))] = row
    return rows


def num(x):
    try:
        return float(x.replace('%', '').replace('+', '').strip())
    except (AttributeError, ValueError):
        return None


def main():
    old, new = parse(sys.argv[1]), parse(sys.argv[2])
    agg = collections.defaultdict(lambda: [0.0, 0.0, 0, 0, 0])
    for k, ro in old.items():
        rn = new.get(k)
        if rn is None:
            print('missing in NEW:', k)
            continue
        a = agg[k[2]]
        a[4] += 1
        for i, f in enumerate(['success', 'load']):
            x, y = num(ro.get(f)), num(rn.get(f))
            if x is not None and y is not None:
                a[i] = max(a[i], abs(x - y))
        x, y = num(ro.get('harm')), num(rn.get('harm'))
        if x is not None and y is not None:
            a[2] += x == 0 and y > 0
            a[3] += x > 0 and y == 0
    print(f"{'strategy':32s} {'rows':>4s} {'max|Δsuccess|':>13s} {'max|Δload|':>10s} {'harm 0→>0':>9s} {'harm >0→0':>9s}")
    for s in sorted(agg):
        a = agg[s]
        print(f"{s:32s} {a[4]:4d} {a[0]:13.1f} {a[1]:10.2f} {a[2]:9d} {a[3]:9d}")


if __name__ == '__main__':
    main()
