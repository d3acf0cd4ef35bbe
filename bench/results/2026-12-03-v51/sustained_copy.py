"""Copy bandwidth under a sustained load: 2 GiB device-to-device copies back to back for SECONDS,
each timed by CUDA events; prints the bandwidth per 0.25 s bucket (median) so that the clock log
(clocks_start) can be read beside it. Usage: python3 sustained_copy.py SECONDS [torch|triad]"""
import sys, time, torch
secs = float(sys.argv[1]); kind = sys.argv[2] if len(sys.argv) > 2 else 'torch'
n = 2 << 30
a = torch.empty(n, dtype=torch.uint8, device='cuda'); a.random_(0, 255)
b = torch.empty_like(a)
ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(4000)]
t0 = time.time(); i = 0
for s, e in ev:
    s.record(); b.copy_(a); e.record(); i += 1
    if i % 50 == 0:
        torch.cuda.synchronize()
        if time.time() - t0 > secs: break
torch.cuda.synchronize()
ms = [s.elapsed_time(e) for s, e in ev[:i]]
# bucket by cumulative GPU time
acc = 0; buckets = {}
for m in ms:
    buckets.setdefault(int(acc / 250), []).append(m); acc += m
for k in sorted(buckets):
    v = sorted(buckets[k]); med = v[len(v) // 2]
    print(f"{k * 0.25:5.2f}s  {len(v):3d} copies  {2 * n / med / 1e9:7.3f} TB/s")
