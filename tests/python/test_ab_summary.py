"""scripts/ab_summary.py: the A/B table from synthetic bench outputs.

Each file is what `fp4moe bench` prints, cut to the lines the script reads (a line before the
header that looks like a row must not count). The expected medians, means and changes are computed
here from the numbers written into the files, not taken from the script.
"""
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "ab_summary.py"

HEAD = """== qwen3-30b (Qwen/Qwen3-30B-A3B): H=2048 I=768 E=128 k=8, nvfp4 W4A16, softmax routing
       4       1.5 before the table: not a result row
  tokens  forward us  route us  experts    TB/s  TFLOP/s   floor us floor%     bf16 us  speedup  check
"""


def bench_output(rows):
    return HEAD + "".join(f"{t:8d} {us:11.1f}      10.1      8.0   0.980      3.5        n/a    n/a  -\n"
                          for t, us in rows)


def write(folder, name, rows):
    (folder / f"{name}.txt").write_text(bench_output(rows))


def run(folder, *args):
    return subprocess.run([sys.executable, str(SCRIPT), str(folder), *args], capture_output=True, text=True)


def test_means_and_changes_against_main(tmp_path):
    write(tmp_path, "gpt-oss-120b-main-1", [(1, 35.0), (8, 128.0)])
    write(tmp_path, "gpt-oss-120b-main-2", [(1, 35.4), (8, 128.4)])
    write(tmp_path, "gpt-oss-120b-new-1", [(1, 32.0), (8, 127.0)])
    write(tmp_path, "gpt-oss-120b-new-2", [(1, 32.2)])  # cut short after T = 1
    (tmp_path / "gpt-oss-120b-new-3.txt").write_text("error: out of memory\n")  # a failed run
    r = run(tmp_path, "--stat", "mean")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0] == "| model | T | main mean µs (n) | new µs (n) | change |"
    base1, new1 = (35.0 + 35.4) / 2, (32.0 + 32.2) / 2
    assert lines[2] == (f"| gpt-oss-120b | 1 | {base1:.1f} (2) | {new1:.1f} (2) | "
                        f"{new1 - base1:+.1f} ({100 * (new1 / base1 - 1):+.1f}%) |")
    base8 = (128.0 + 128.4) / 2
    assert lines[3] == (f"| gpt-oss-120b | 8 | {base8:.1f} (2) | 127.0 (1) | "
                        f"{127.0 - base8:+.1f} ({100 * (127.0 / base8 - 1):+.1f}%) |")
    assert len(lines) == 4


def test_base_option_and_missing_variant(tmp_path):
    write(tmp_path, "qwen3-30b-pdl0-1", [(1, 23.0)])
    write(tmp_path, "qwen3-30b-pdl1-1", [(1, 21.0)])
    write(tmp_path, "kimi-k2-pdl0-1", [(1, 80.0)])
    r = run(tmp_path, "--base", "pdl1")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0] == "| model | T | pdl1 median µs (n) | pdl0 µs (n) | change |"
    # kimi-k2 has no pdl1 run: no row; qwen3-30b against pdl1
    assert lines[2:] == ["| qwen3-30b | 1 | 21.0 (1) | 23.0 (1) | +2.0 (+9.5%) |"]
    bad = run(tmp_path, "--base", "main")
    assert bad.returncode == 1 and "--base: got main, need one of pdl0, pdl1" in bad.stderr


def test_empty_folder_is_an_error(tmp_path):
    r = run(tmp_path)
    assert r.returncode == 1 and "no <model>-<variant>-<rep>.txt file with result rows" in r.stderr


def test_median_is_the_default(tmp_path):
    # three processes each, one of them on the clock step: the median ignores it, the mean not
    for i, us in enumerate([100.0, 101.0, 130.0]):
        write(tmp_path, f"qwen3-30b-main-{i}", [(128, us)])
    for i, us in enumerate([97.0, 99.0, 98.0]):
        write(tmp_path, f"qwen3-30b-new-{i}", [(128, us)])
    lines = run(tmp_path).stdout.strip().splitlines()
    assert lines[0] == "| model | T | main median µs (n) | new µs (n) | change |"
    assert lines[2] == f"| qwen3-30b | 128 | 101.0 (3) | 98.0 (3) | -3.0 ({100 * (98.0 / 101.0 - 1):+.1f}%) |"
    mean = run(tmp_path, "--stat", "mean").stdout.strip().splitlines()
    assert mean[2].startswith(f"| qwen3-30b | 128 | {331.0 / 3:.1f} (3) | 98.0 (3) |")
    bad = run(tmp_path, "--stat", "max")
    assert bad.returncode != 0 and "--stat" in bad.stderr


def test_tokens_in_the_name_are_one_model(tmp_path):
    # device_lib.sh's ab_point names each process by its tokens too: two processes of one preset
    # in one round (T = 8192, and T = 512 and 2048 in one process) are both kept, as one model
    write(tmp_path, "qwen3-30b_w4a16@8192-main-r1", [(8192, 1260.0)])
    write(tmp_path, "qwen3-30b_w4a16@512+2048-main-r1", [(512, 191.0), (2048, 416.0)])
    write(tmp_path, "qwen3-30b_w4a16@8192-new-r1", [(8192, 1250.0)])
    write(tmp_path, "qwen3-30b_w4a16@512+2048-new-r1", [(512, 192.0), (2048, 414.0)])
    lines = run(tmp_path).stdout.strip().splitlines()
    assert lines[2:] == [
        f"| qwen3-30b_w4a16 | 512 | 191.0 (1) | 192.0 (1) | +1.0 ({100 * (192.0 / 191.0 - 1):+.1f}%) |",
        f"| qwen3-30b_w4a16 | 2048 | 416.0 (1) | 414.0 (1) | -2.0 ({100 * (414.0 / 416.0 - 1):+.1f}%) |",
        f"| qwen3-30b_w4a16 | 8192 | 1260.0 (1) | 1250.0 (1) | -10.0 ({100 * (1250.0 / 1260.0 - 1):+.1f}%) |",
    ]


def bench_output_with_clocks(rows):
    """rows: (tokens, µs, MHz or None): each row followed by the bench's clock line where MHz is given."""
    out = HEAD
    for t, us, mhz in rows:
        out += f"{t:8d} {us:11.1f}      10.1      8.0   0.980      3.5        n/a    n/a  -\n"
        if mhz is not None:
            out += f"         SM clock {mhz} MHz (median of 40 readings over the timed replays, min {mhz - 30}), board 690 W\n"
    return out


def test_clock_lines_give_the_clock_and_cycles_table(tmp_path):
    # main: 1000 us at 1600 MHz (median of 3); fast: 900 us at 1760 MHz: 10% less time, but 10% more
    # clock, so the cycles changed by 900 * 1760 / (1000 * 1600) - 1 = -1.0%
    for i, (us, mhz) in enumerate([(1000.0, 1600), (1010.0, 1590), (995.0, 1610)]):
        (tmp_path / f"kimi-k2-main-{i}.txt").write_text(bench_output_with_clocks([(16384, us, mhz), (8192, 500.0, None)]))
    for i, (us, mhz) in enumerate([(900.0, 1760), (905.0, 1750), (899.0, 1770)]):
        (tmp_path / f"kimi-k2-fast-{i}.txt").write_text(bench_output_with_clocks([(16384, us, mhz), (8192, 450.0, None)]))
    r = run(tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout.strip().splitlines()
    # the time table as before: both token counts
    assert out[0] == "| model | T | main median µs (n) | fast µs (n) | change |"
    assert out[2].startswith("| kimi-k2 | 8192 | 500.0 (3) | 450.0 (3) |")
    assert out[3].startswith("| kimi-k2 | 16384 | 1000.0 (3) | 900.0 (3) |")
    # then the clock table: only T = 16384 has clock lines
    at = out.index("SM clock over the timed replays, and the change in cycles (µs x MHz):")
    clock = out[at + 2:]
    assert clock[0] == "| model | T | main median MHz (n) | fast MHz (n) | clock | cycles |"
    cycles = 100 * (900.0 * 1760 / (1000.0 * 1600) - 1)
    assert clock[2:] == [f"| kimi-k2 | 16384 | 1600 (3) | 1760 (3) | {100 * (1760 / 1600 - 1):+.1f}% | {cycles:+.1f}% |"]


def test_a_clock_line_not_under_a_row_is_not_read(tmp_path):
    # a clock line before the table, and one after a line that is not a row, belong to no row
    text = HEAD.replace("  tokens", "         SM clock 1500 MHz (stray)\n  tokens") + \
        f"{128:8d} {100.0:11.1f}      10.1      8.0   0.980      3.5        n/a    n/a  -\n" + \
        "note: something\n         SM clock 1700 MHz (median of 2 readings over the timed replays, min 1700)\n"
    (tmp_path / "qwen3-30b-main-1.txt").write_text(text)
    (tmp_path / "qwen3-30b-new-1.txt").write_text(text)
    r = run(tmp_path)
    assert r.returncode == 0, r.stderr
    assert "SM clock over" not in r.stdout
    assert r.stdout.strip().splitlines()[2] == "| qwen3-30b | 128 | 100.0 (1) | 100.0 (1) | +0.0 (+0.0%) |"
