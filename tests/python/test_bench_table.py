"""scripts/bench_table.py: targets per regime, and --copy-tbps's floors recomputed at a given copy rate.

The JSON is synthetic; the expected floors and fractions are computed here from its bytes, flops
and times, not taken from the script.
"""
import json
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "bench_table.py"

COPY, GEMM = 4.0e12, 800e12  # what the synthetic run "measured"
ROWS = [  # tokens, bytes, flops, µs
    (8, 1.6e9, 1.0e11, 440.0),      # memory-bound: 400 µs at 4.0 TB/s, 125 at 800 TFLOP/s
    (2048, 2.0e9, 5.6e11, 900.0),   # crossover at 4.0 TB/s (500 against 700 µs)
    (16384, 2.0e9, 4.0e12, 7000.0),  # compute-bound: 5000 µs
]


def write(path):
    rows = []
    for t, b, f, us in ROWS:
        floor = 1e6 * max(b / COPY, f / GEMM)
        rows.append({"tokens": t, "bytes": b, "flops": f, "forward_us_median": us, "floor_us": floor,
                     "floor_fraction": floor / us, "floor_bound": "memory" if b / COPY >= f / GEMM else "compute"})
    doc = {"machine": {"ceilings": {"copy_bytes_per_s": COPY, "gemm_flops_per_s": GEMM}, "gpu": {"name": "G"}},
           "runs": [{"preset": "qwen3-30b", "quant": "w4a16", "rows": rows}]}
    path.write_text(json.dumps(doc))


def table_rows(out):
    """tokens -> (floor µs, bound, floor/time %, met) from the printed table."""
    got = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 6 and cells[0].isdigit():
            got[int(cells[0])] = (float(cells[2].replace(",", "")), cells[3], int(cells[4].rstrip("%")), cells[6])
    return got


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def test_the_runs_own_floors(tmp_path):
    write(tmp_path / "r.json")
    r = run(tmp_path / "r.json")
    assert r.returncode == 0, r.stderr
    got = table_rows(r.stdout)
    assert set(got) == {8, 2048, 16384}
    for t, b, f, us in ROWS:
        floor = 1e6 * max(b / COPY, f / GEMM)
        assert abs(got[t][0] - floor) < 0.06
        assert got[t][2] == round(100 * floor / us)
    assert [got[t][1] for t in (8, 2048, 16384)] == ["memory", "crossover", "compute"]
    assert got[8][3] == "yes" and got[16384][3] == "no"  # 91% of a memory floor; 71% of a compute one


def test_copy_rate_given_recomputes_the_floors(tmp_path):
    write(tmp_path / "r.json")
    rate = 4.4e12
    r = run("--copy-tbps", rate / 1e12, tmp_path / "r.json")
    assert r.returncode == 0, r.stderr
    assert "copy 4.40 TB/s (given; the run measured 4.00)" in r.stdout
    got = table_rows(r.stdout)
    for t, b, f, us in ROWS:
        floor = 1e6 * max(b / rate, f / GEMM)
        assert abs(got[t][0] - floor) < 0.06, t
        assert got[t][2] == round(100 * floor / us), t
    # 8 tokens: 363.6 µs of 440 is 83%, under the memory target that the run's own rate met
    assert got[8][3] == "no"
    # 2048 tokens: 454.5 against 700 µs is compute-bound now (the flop term 1.54x the byte term)
    assert got[2048][1] == "compute"


def test_bad_copy_rate_is_refused(tmp_path):
    write(tmp_path / "r.json")
    for bad in ("fast", "0", "-1"):
        r = run("--copy-tbps", bad, tmp_path / "r.json")
        assert r.returncode == 2 and "--copy-tbps" in r.stderr, bad
