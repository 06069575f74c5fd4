#!/usr/bin/env python3
"""Where gmlake's decisions on the GPU and in the replay part (eighth session, runs 63-65).

    gmlake replay HISTORY --policy gmlake --backend sim:h100 --snapshot-out /tmp/sim.pickle [--conf C]
    python3 bench/gpu-runs/2026-11-27/compare-maps.py HISTORY /tmp/sim.pickle

HISTORY is a `train.py --alloc ab --history-out` file: the A/B round's allocations as gmlake served them on the
GPU, with its segment_map / segment_unmap entries (one per map and unmap). The replay's --snapshot-out holds the
same for the replay. The allocations are split into steps where the live bytes fall back under 0.5 GB after
passing 0.8 GB (bert-train-eval's weights are 0.44 GB); per step it prints maps (count, MiB) and unmaps of both.
"""
import pickle, lzma, sys
def load(p):
    f=lzma.open(p) if p.endswith('.xz') else open(p,'rb')
    return pickle.load(f)['device_traces'][0]
def per_alloc(tr):
    out=[];n=0
    for e in tr:
        if e['action']=='alloc': n+=1
        elif e['action'] in('segment_map','segment_unmap'): out.append((n,e['action'],e['size']))
    return out
g=per_alloc(load(sys.argv[1])); s=per_alloc(load(sys.argv[2]))
# steps: by alloc index boundaries from the GPU trace: use allocated bytes
tr=load(sys.argv[1]); live=0; n=0; bounds=[]; above=False
for e in tr:
    if e['action']=='alloc': n+=1; live+=e['size']
    elif e['action']=='free_requested': live-=e['size']
    if live>0.8e9: above=True
    if above and live<0.5e9: bounds.append(n); above=False
bounds.append(10**9)
prev=0
for k,b in enumerate(bounds):
    def cnt(lst,a): return sum(1 for (x,act,sz) in lst if prev<x<=b and act==a), sum(sz for (x,act,sz) in lst if prev<x<=b and act==a)/2**20
    gm,gmb=cnt(g,'segment_map'); gu,_=cnt(g,'segment_unmap'); sm,smb=cnt(s,'segment_map'); su,_=cnt(s,'segment_unmap')
    print(f"{k:3d} allocs {prev:6d}-{b:6d} gpu maps {gm:5d} {gmb:7.0f} MiB unmaps {gu:5d} | sim maps {sm:5d} {smb:7.0f} MiB unmaps {su:5d}")
    prev=b
