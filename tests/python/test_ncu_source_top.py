"""scripts/ncu_source_top.py: the per-wait report on a synthetic ncu source page.

The CSV below is what `ncu --page source --print-source sass --csv` writes, cut to the columns
the script reads: a consumer loop whose inline wait (run 1000 times) branches to an out-of-line
retry 900 times, and a producer wait that never retries. The expected shares come from the
counts written into the file, not from the script.
"""
import csv
import io
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "ncu_source_top.py"

HEADER = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed"]
ROWS = [
    # consumer loop: inline wait, branch to the retry at 0x900
    ("0x100", "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R8", 10, 1000),
    ("0x110", "@!P0  BRA 0x900", 50, 1000),
    ("0x120", "HGMMA.64x64x16.F32.BF16 R24, R56, gdesc[UR16], R24", 30, 1000),
    # producer loop: its wait never fails
    ("0x200", "SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR5], R9", 5, 500),
    ("0x210", "@!P1  BRA 0x940", 1, 500),
    ("0x220", "LDGSTS.E.BYPASS.128 [R3], desc[UR6][R4.64]", 4, 500),
    # the consumer's retry: 2700 tries, 900 exits back to the loop
    ("0x900", "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R8", 0, 2700),
    ("0x910", "@!P0  BRA 0x900", 0, 2700),
    ("0x920", "BRA 0x120", 0, 900),
    # the producer's retry, never entered
    ("0x940", "SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR5], R9", 0, 0),
    ("0x950", "@!P1  BRA 0x940", 0, 0),
    ("0x960", "BRA 0x220", 0, 0),
]


def page(path, header, rows, copies=1):
    """Write a source page: `copies` sections of one kernel (as a page of several launches)."""
    text = io.StringIO()
    writer = csv.writer(text, quoting=csv.QUOTE_ALL)
    for _ in range(copies):
        writer.writerow(["Kernel Name", "void kernel()"])
        writer.writerow(header)
        writer.writerows(rows)
    path.write_text(text.getvalue())
    return path


def script(*args):
    out = subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def run(tmp_path):
    return script(page(tmp_path / "source.csv", HEADER, ROWS), "--top", "2")


def wait_lines(stdout):
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("mbarrier waits"))
    return {line.split()[0]: line.split()[1:] for line in lines[start + 1:] if line.strip()}


def test_each_inline_wait_is_reported_with_its_retry_share(tmp_path):
    waits = wait_lines(run(tmp_path))
    assert set(waits) == {"0x100", "0x200"}, waits  # the retry blocks are not inline waits
    executions, share, per_wait = waits["0x100"]
    assert float(executions) == 1000
    assert share == "90.0%"  # 900 of 1000 waits left through the retry
    assert float(per_wait) == 2.7  # 2700 retries / 1000 waits
    executions, share, per_wait = waits["0x200"]
    assert float(executions) == 500 and share == "0.0%" and float(per_wait) == 0


def test_samples_are_still_ranked(tmp_path):
    stdout = run(tmp_path)
    assert "100 samples" in stdout
    top = [line for line in stdout.splitlines() if line.startswith("  ") and "%" in line][:2]
    assert "BRA 0x900" in top[0] and "HGMMA" in top[1], top


# --regions: a warp-specialized kernel cut at its first and last wgmma and its setmaxnreg.dealloc.
REGION_HEADER = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed",
                 "stall_wait", "stall_long_sb", "stall_wait (Not Issued)"]
REGION_ROWS = [
    ("0x000", "LDC R1, c[0x0][0x28]", 10, 100, 10, 0, 99),                  # to the first wgmma
    ("0x010", "HGMMA.64x128x16.F32.BF16 R24, R176, gdesc[UR24], R24", 40, 200, 30, 10, 99),
    ("0x020", "LOP3.LUT R3, R3, 0x1, RZ, 0xc0, !PT", 20, 200, 20, 0, 99),
    ("0x030", "HGMMA.64x128x16.F32.BF16 R88, R164, gdesc[UR16], R88", 10, 200, 10, 0, 99),
    ("0x040", "FFMA R88, R88, R12, R9", 15, 300, 15, 0, 99),                # after the last wgmma
    ("0x050", "STG.E.U16 desc[UR28][R14.64], R23", 5, 100, 0, 5, 99),
    ("0x060", "USETMAXREG.DEALLOC.CTAPOOL 0x38", 0, 10, 0, 0, 99),           # the producer
    ("0x070", "LDGSTS.E.BYPASS.128 [R3], desc[UR6][R4.64]", 0, 90, 0, 0, 99),
]


def run_regions(tmp_path, copies=1):
    lines = script(page(tmp_path / "regions.csv", REGION_HEADER, REGION_ROWS, copies), "--regions").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("regions"))
    return [line for line in lines[start + 1:] if line.startswith("  ")]


def test_regions_cut_at_the_wgmmas_and_the_dealloc(tmp_path):
    for copies in (1, 2):  # the second copy must not count
        got = run_regions(tmp_path, copies)
        names = [line.split("[")[0].strip() for line in got]
        assert names == ["to the first wgmma", "first to last wgmma", "after the last wgmma",
                         "from setmaxnreg.dealloc"], got
        # 100 samples and 1200 executed instructions in all; the shares follow from the rows
        shares = [line.split(")")[1].split()[:2] for line in got]
        assert shares == [["10.0%", "8.3%"], ["70.0%", "50.0%"], ["20.0%", "33.3%"], ["0.0%", "8.3%"]], got
        # the epilogue's 20 samples: wait 15, long_sb 5; "Not Issued" columns are not reasons
        assert got[2].endswith("wait 75%, long_sb 25%"), got[2]
        assert got[1].endswith("wait 86%, long_sb 14%"), got[1]


# --regions on an mma.sync kernel (no wgmma): cut at the head of the loop around its first HMMA
# (the target of the branch back to it, before the HMMA in address order) and after its last HMMA.
MMA_ROWS = [
    ("0x000", "S2R R0, SR_TID.X", 20, 100, 20, 0, 99),                       # the setup
    ("0x010", "BAR.SYNC.DEFER_BLOCKING 0x0", 10, 100, 10, 0, 99),
    ("0x020", "DEPBAR.LE SB0, 0x0", 5, 100, 5, 0, 99),                       # the k loop's head
    ("0x030", "PRMT R18, R70, R17, 0x81800100", 25, 300, 0, 25, 99),
    ("0x040", "HMMA.16816.F32.BF16 R8, R12, R16, R8", 10, 200, 10, 0, 99),
    ("0x050", "@P0 HMMA.16816.F32.BF16 R8, R20, R18, R8", 10, 200, 10, 0, 99),
    ("0x060", "@!P0 BRA 0x020", 0, 100, 0, 0, 99),
    ("0x070", "@!P1 BRA 0x000", 10, 100, 10, 0, 99),                         # the slot loop's branch
    ("0x080", "STG.E desc[UR4][R2.64], R8", 10, 100, 0, 10, 99),              # the epilogue
]


def mma_regions(tmp_path, rows):
    lines = script(page(tmp_path / "mma.csv", REGION_HEADER, rows), "--regions").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("regions"))
    return [line for line in lines[start + 1:] if line.startswith("  ")]


def test_regions_cut_an_mma_sync_kernel_at_its_k_loop(tmp_path):
    got = mma_regions(tmp_path, MMA_ROWS)
    assert [line.split("[")[0].strip() for line in got] == ["to the k loop", "k loop to last mma",
                                                             "after the last mma"], got
    # 100 samples, 1300 executed: setup 30 / 200, loop 50 / 800, after 20 / 300
    assert [line.split(")")[1].split()[:2] for line in got] == [["30.0%", "15.4%"], ["50.0%", "61.5%"],
                                                                ["20.0%", "23.1%"]], got
    assert got[1].endswith("long_sb 50%, wait 50%") or got[1].endswith("wait 50%, long_sb 50%"), got[1]
    # without the branches back: cut at the first HMMA
    no_loop = [r for r in MMA_ROWS if "BRA" not in r[1]]
    got = mma_regions(tmp_path, no_loop)
    assert [line.split("[")[0].strip() for line in got] == ["to the first mma", "first to last mma",
                                                             "after the last mma"], got


def test_kernel_picks_one_launch_of_a_page(tmp_path):
    # a page of two launches: the wgmma kernel, then the mma.sync one
    path = tmp_path / "two.csv"
    first = page(tmp_path / "a.csv", REGION_HEADER, REGION_ROWS).read_text()
    second = page(tmp_path / "b.csv", REGION_HEADER, MMA_ROWS).read_text()
    path.write_text(first + second)
    out = script(path, "--kernel", "1", "--regions")
    assert "9 instructions, 100 samples" in out, out  # MMA_ROWS alone
    assert "to the k loop" in out and "wgmma" not in out, out
    out = script(path, "--kernel", "0", "--regions")
    assert "8 instructions, 100 samples" in out and "from setmaxnreg.dealloc" in out, out
    bad = subprocess.run([sys.executable, str(SCRIPT), str(path), "--kernel", "2"], capture_output=True, text=True)
    assert bad.returncode == 1 and "the page has 2 kernels" in bad.stdout, bad.stdout
