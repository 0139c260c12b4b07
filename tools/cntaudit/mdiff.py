#!/usr/bin/env python3
# mdiff.py before.txt after.txt: nonzero differences of /metrics samples
import sys
def load(p):
    m = {}
    for l in open(p):
        if l.startswith('#') or not l.strip(): continue
        k, v = l.rsplit(' ', 1)
        try: m[k] = float(v)
        except ValueError: pass
    return m
a, b = load(sys.argv[1]), load(sys.argv[2])
for k in sorted(set(a) | set(b)):
    if 'bytes' in k or 'seconds' in k or k.startswith('go_') or k.startswith('process_') or 'kicks' in k or 'promhttp' in k: continue
    d = b.get(k, 0) - a.get(k, 0)
    if d: print(f"  {k} {d:+g}")
