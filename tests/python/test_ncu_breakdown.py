"""scripts/ncu_breakdown.py: one forward's kernels from a synthetic `ncu --csv` profile.

The profile holds what the bench launches: the routing kernel on its own before each forward,
then the forward's kernels; forwards repeated, the profile's last one cut short (as a
`--launch-count` cut leaves it). The script prints the last complete forward. The expected
lines are built here from the durations written into the file.
"""
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "ncu_breakdown.py"

HEADER = '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n'
# as ncu 2025 writes them (the anonymous namespace as "unnamed>::"), and the other spelling
GEMM = "void unnamed>::sm90_rsws_gemm<16, 1, 2, 0, 16>(unnamed>::Params, unnamed>::WeightMaps)"
NARROW = "void fp4moe::cuda::(anonymous namespace)::sm90_rsws_gemm<8, 1, 4, 0, 2>((anonymous namespace)::Params)"


def profile(forwards):
    """forwards: lists of (kernel, ns); each forward follows a routing kernel of 9,000 ns."""
    lines, kid = ["==PROF== a line ncu prints, not CSV\n", HEADER], 0
    for kernels in forwards:
        for name, ns in [("unnamed>::route_kernel(unnamed>::RouteKernelArgs)", 9000)] + kernels:
            lines.append(f'"{kid}","{name}","gpu__time_duration.sum","ns","{ns:,}"\n')
            lines.append(f'"{kid}","{name}","dram__bytes_read.sum","byte","1,024"\n')
            kid += 1
    return "".join(lines)


def test_prints_the_last_complete_forward_without_the_routing(tmp_path):
    first = [("unnamed>::permute_count(PermuteArgs, long, long)", 3000), (GEMM, 180000), (NARROW, 45000)]
    last = [("unnamed>::permute_count(PermuteArgs, long, long)", 3100), (GEMM, 183600), (NARROW, 45900)]
    path = tmp_path / "p.csv"
    path.write_text(profile([first, last, last[:1]]))
    out = subprocess.run([sys.executable, str(SCRIPT), str(path)], capture_output=True, text=True, check=True).stdout
    rows = [line.split() for line in out.strip().splitlines()]
    names = [" ".join(r[:-2]) for r in rows[:-1]]
    assert names == ["permute_count", "sm90_rsws_gemm<16, 1, 2, 0, 16>", "sm90_rsws_gemm<8, 1, 4, 0, 2>"]
    assert [float(r[-2]) for r in rows[:-1]] == [ns / 1000 for _, ns in last]
    assert "route_kernel" not in out
    total = sum(ns for _, ns in last) / 1000
    assert rows[-1][:3] == ["sum", "of", "kernels"] and float(rows[-1][3]) == round(total, 1)
    assert out.strip().endswith(f"({len(last)} kernels)")
