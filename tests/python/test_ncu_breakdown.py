"""scripts/ncu_breakdown.py: one forward's kernels from a synthetic `ncu --csv` profile.

The profile holds what the bench launches: the routing kernel on its own before each forward,
then the forward's kernels; forwards repeated, the profile's last one cut short (as a
`--launch-count` cut leaves it). The script prints the last complete forward. The expected
lines are built here from the durations written into the file.
"""
import pathlib
import re
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "ncu_breakdown.py"

HEADER = '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n'
# as ncu 2025 writes them (the anonymous namespace as "unnamed>::"), and the other spelling
GEMM = "void unnamed>::sm90_rsws_gemm<16, 1, 2, 0, 16>(unnamed>::Params, unnamed>::WeightMaps)"
NARROW = "void fp4moe::cuda::(anonymous namespace)::sm90_rsws_gemm<8, 1, 4, 0, 2>((anonymous namespace)::Params)"


ROUTE = "unnamed>::route_kernel(unnamed>::RouteKernelArgs)"
ROUTE_REG = "void unnamed>::route_kernel_reg<12>(unnamed>::RouteKernelArgs)"


def profile(forwards, route=ROUTE, routes=1):
    """forwards: lists of (kernel, ns); each forward follows `routes` launches of the routing
    kernel, 9,000 ns each. Each launch also has dram__bytes_read.sum = ns / 2 bytes (a second
    metric, printed as a column)."""
    lines, kid = ["==PROF== a line ncu prints, not CSV\n", HEADER], 0
    for kernels in forwards:
        for name, ns in [(route, 9000)] * routes + kernels:
            lines.append(f'"{kid}","{name}","gpu__time_duration.sum","ns","{ns:,}"\n')
            lines.append(f'"{kid}","{name}","dram__bytes_read.sum","byte","{ns // 2:,}"\n')
            kid += 1
    return "".join(lines)


ROW = re.compile(r"^  (.+?)\s+([0-9.]+) us(?: \(\d+ kernels\))?\s*(.*)$")


def parse(out):
    """(kernel rows as (name, us, [extra values]), the sum row's us, the legend lines)."""
    lines = out.rstrip().splitlines()
    assert lines[0].split()[:2] == ["kernel", "us"] and lines[0].split()[2] == "bytes_read"
    rows, total, legend = [], None, []
    for line in lines[1:]:
        if line.startswith("    "):
            legend.append(line.strip())
            continue
        m = ROW.match(line)
        assert m, line
        if m.group(1) == "sum of kernels":
            total = float(m.group(2))
        else:
            rows.append((m.group(1), float(m.group(2)), [float(v) for v in m.group(3).split()]))
    return rows, total, legend


def test_prints_the_last_complete_forward_without_the_routing(tmp_path):
    first = [("unnamed>::permute_count(PermuteArgs, long, long)", 3000), (GEMM, 180000), (NARROW, 45000)]
    last = [("unnamed>::permute_count(PermuteArgs, long, long)", 3100), (GEMM, 183600), (NARROW, 45900)]
    path = tmp_path / "p.csv"
    path.write_text(profile([first, last, last[:1]]))
    out = subprocess.run([sys.executable, str(SCRIPT), str(path)], capture_output=True, text=True, check=True).stdout
    rows, total, legend = parse(out)
    assert [n for n, _, _ in rows] == ["permute_count", "sm90_rsws_gemm<16, 1, 2, 0, 16>", "sm90_rsws_gemm<8, 1, 4, 0, 2>"]
    assert [us for _, us, _ in rows] == [ns / 1000 for _, ns in last]
    # the second metric, per launch of the last forward (not the first forward's values)
    assert [extra for _, _, extra in rows] == [[float(ns // 2)] for _, ns in last]
    assert "route_kernel" not in out
    assert total == round(sum(ns for _, ns in last) / 1000, 1)
    assert f"({len(last)} kernels)" in out
    assert legend == ["bytes_read: dram__bytes_read.sum"]


def test_the_register_routing_kernel_timed_apart_is_left_out_too(tmp_path):
    """The bench times routing on its own, launching route_kernel_reg<N> several times in a row:
    those launches neither mark a forward nor appear in it."""
    fwd = [("unnamed>::permute_block(PermuteArgs)", 5200), (GEMM, 689100), (NARROW, 372900)]
    path = tmp_path / "p.csv"
    path.write_text(profile([fwd, fwd, fwd[:2]], route=ROUTE_REG, routes=3))
    out = subprocess.run([sys.executable, str(SCRIPT), str(path)], capture_output=True, text=True, check=True).stdout
    rows, total, _ = parse(out)
    assert [(n, us) for n, us, _ in rows] == [
        ("permute_block", 5.2), ("sm90_rsws_gemm<16, 1, 2, 0, 16>", 689.1), ("sm90_rsws_gemm<8, 1, 4, 0, 2>", 372.9)]
    assert "route_kernel" not in out
    assert total == round((5200 + 689100 + 372900) / 1000, 1)


def test_a_rate_of_bytes_also_gets_the_bytes_it_moved(tmp_path):
    """ncu --print-units base writes rates in bytes per second: the script adds, per launch, the
    bytes moved (rate x duration) in GB, and leaves a rate of something else (not bytes) alone."""
    rates = {GEMM: (4.0e12, 80.0), NARROW: (2.5e12, 60.0)}  # L2 bytes per second, tensor pipe %
    durations = {GEMM: 9_000_000, NARROW: 400_000}  # ns
    lines, kid = [HEADER], 0
    for _ in range(2):  # two forwards: the script prints the last complete one
        for name in (GEMM, NARROW):
            lines.append(f'"{kid}","{name}","gpu__time_duration.sum","ns","{durations[name]:,}"\n')
            lines.append(f'"{kid}","{name}","lts__t_bytes.sum.per_second","byte/s","{rates[name][0]:,.2f}"\n')
            lines.append(f'"{kid}","{name}","sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",'
                         f'"%","{rates[name][1]}"\n')
            kid += 1
    path = tmp_path / "p.csv"
    path.write_text("".join(lines))
    out = subprocess.run([sys.executable, str(SCRIPT), str(path)], capture_output=True, text=True, check=True).stdout
    head, *body = out.rstrip().splitlines()
    # the metrics by their full names (lts__ before sm__), then the bytes moved
    assert head.split()[2:] == ["t_bytes", "pipe_tensor_op_h", "t_bytes", "GB"]
    rows = [line.split() for line in body if "sm90_rsws_gemm" in line]
    assert len(rows) == 2
    for row, name in zip(rows, (GEMM, NARROW)):
        rate, pct, gb = (float(v) for v in row[-3:])
        assert pct == rates[name][1] and rate == float(f"{rates[name][0]:.4g}")
        assert gb == round(rates[name][0] * durations[name] * 1e-9 / 1e9, 1)
    assert "    t_bytes GB: lts__t_bytes.sum.per_second x gpu__time_duration.sum" in out
    assert "pipe_tensor_op_h GB" not in out


def test_a_rate_of_cycles_also_gets_the_cycles_the_launch_took(tmp_path):
    """The SM clock (cycles per second) times a launch's duration: its cycles, in millions; two
    launches at different clocks and durations but the same cycles read the same."""
    clocks = {GEMM: 1.5e9, NARROW: 1.8e9}  # Hz
    durations = {GEMM: 6_000_000, NARROW: 5_000_000}  # ns: 9.0 M cycles each
    lines, kid = [HEADER], 0
    for _ in range(2):
        for name in (GEMM, NARROW):
            lines.append(f'"{kid}","{name}","gpu__time_duration.sum","ns","{durations[name]:,}"\n')
            lines.append(f'"{kid}","{name}","sm__cycles_elapsed.avg.per_second","cycle/s","{clocks[name]:,.1f}"\n')
            kid += 1
    path = tmp_path / "p.csv"
    path.write_text("".join(lines))
    out = subprocess.run([sys.executable, str(SCRIPT), str(path)], capture_output=True, text=True, check=True).stdout
    head, *body = out.rstrip().splitlines()
    assert head.split()[2:] == ["cycles_elapsed", "cycles_elapsed", "M"]
    rows = [line.split() for line in body if "sm90_rsws_gemm" in line]
    assert len(rows) == 2
    for row, name in zip(rows, (GEMM, NARROW)):
        clock, mcycles = (float(v) for v in row[-2:])
        assert clock == float(f"{clocks[name]:.4g}")
        assert mcycles == round(clocks[name] * durations[name] * 1e-9 / 1e6, 1) == 9.0
    assert "    cycles_elapsed M: sm__cycles_elapsed.avg.per_second x gpu__time_duration.sum, millions" in out
    assert "cycles_elapsed GB" not in out
