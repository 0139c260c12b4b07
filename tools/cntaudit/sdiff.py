#!/usr/bin/env python3
# sdiff.py before.json after.json: nonzero differences of numeric leaves
import json, sys
def flat(o, p, out):
    if isinstance(o, dict):
        for k, v in o.items(): flat(v, p + [k], out)
    elif isinstance(o, list):
        for i, v in enumerate(o):
            key = v.get('public_key', str(i))[:6] if isinstance(v, dict) else str(i)
            flat(v, p + [key], out)
    elif isinstance(o, (int, float)) and not isinstance(o, bool):
        out['.'.join(p)] = o
a, b = {}, {}
flat(json.load(open(sys.argv[1])), [], a)
flat(json.load(open(sys.argv[2])), [], b)
skip = ('bytes', 'tx_kicks', 'ring_empty_descs', 'curve25519', 'backlog_peak')
for k in sorted(set(a) | set(b)):
    d = b.get(k, 0) - a.get(k, 0)
    if d and not any(s in k for s in skip):
        print(f"  {k} {d:+}")
