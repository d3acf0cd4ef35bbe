# bf16 8192^3 GEMM: 20 products after 3 warm-ups (as the bench's ceiling) against the same
# measured after 1.5 s of back-to-back products (the power cap's steady state).
import time, torch
n = 8192
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
def rate(k):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(k): torch.matmul(a, b, out=c)
    e.record(); e.synchronize()
    return 2 * n**3 * k / (s.elapsed_time(e) * 1e-3) / 1e12
time.sleep(2.0)
for _ in range(3): torch.matmul(a, b, out=c)
torch.cuda.synchronize()
print(f"short (20 products, rested): {rate(20):.0f} TFLOP/s")
t0 = time.time()
while time.time() - t0 < 1.5: rate(50)
print(f"after 1.5 s back to back, next 200 products: {rate(200):.0f} TFLOP/s")
print(f"then the next 400 products: {rate(400):.0f} TFLOP/s")
