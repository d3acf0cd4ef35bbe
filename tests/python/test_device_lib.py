"""scripts/device_lib.sh's A/B round loops, run by bash with ab_point replaced by a recorder.

The order of the processes is what an A/B's fairness rests on: ab_rounds runs every spec of one
variant before the next variant, ab_rounds_by_point every variant of one spec before the next
spec. The expected orders are built here from the variants and specs, not taken from the script.
"""
import pathlib
import random
import shutil
import subprocess
import tarfile

import pytest

LIB = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "device_lib.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def calls(tmp_path, loop, round_s, point_s, variants, specs, point_seconds=0.0, first_specs=()):
    """The ab_point calls (variant, round, model, quant, tokens) that `loop` makes."""
    log = tmp_path / "calls.txt"
    script = f"""
set -u
OUT={tmp_path}/out
source {LIB}
ab_point() {{ echo "$1 $2 $3 $4 $5" >> {log}; sleep {point_seconds}; }}
{loop} {round_s} {point_s} "{' '.join(variants)}" "{' '.join(specs)}" "{' '.join(first_specs)}"
echo "rounds $ab_round"
"""
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    lines = log.read_text().splitlines() if log.exists() else []
    rounds = int(result.stdout.split()[-1])
    return [tuple(line.split()) for line in lines], rounds


VARIANTS = ["main", "new"]
SPECS = ["kimi-k2:w4a16:8,32", "qwen3-30b:w4a4:128"]


def split(spec):
    model, quant, tokens = spec.split(":")
    return model, quant, tokens


def source_lib(tmp_path, body, stubs, out_dir, timeout=None):
    """bash running `body` after sourcing the library, with the stand-ins in `stubs` first on
    PATH and OUT=out_dir: the completed process."""
    script = f"set -u\nexport PATH={stubs}:$PATH\nOUT={out_dir}\nsource {LIB}\n{body}\n"
    return subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=timeout)


def stand_in(path, text):
    """An executable script at `path`."""
    path.write_text(text)
    path.chmod(0o755)


def test_by_point_runs_each_spec_under_every_variant_in_turn(tmp_path):
    # 0.6 s a process and rounds begun within 2 s: exactly one round of 4 processes. `ok` counts
    # whole seconds from sourcing, so the first round's test reads 0 or 1 (< 2) and the second's,
    # 2.4 s later, at least 2. (With 1 s and 0.4 s a process the first test read 1, no round,
    # whenever a second boundary fell between sourcing and the loop: a loaded CI machine.)
    got, rounds = calls(tmp_path, "ab_rounds_by_point", 2, 100, VARIANTS, SPECS, point_seconds=0.6)
    expected = [(v, "1", *split(s)) for s in SPECS for v in VARIANTS]
    assert rounds == 1
    assert got == expected


def test_by_variant_runs_every_spec_of_one_variant_first(tmp_path):
    got, rounds = calls(tmp_path, "ab_rounds", 2, 100, VARIANTS, SPECS, point_seconds=0.6)  # as above
    expected = [(v, "1", *split(s)) for v in VARIANTS for s in SPECS]
    assert rounds == 1
    assert got == expected


def test_by_point_starts_no_process_past_point_s(tmp_path):
    # a round may begin (ROUND_S 100), but no process once POINT_S (0) has passed
    got, rounds = calls(tmp_path, "ab_rounds_by_point", 100, 0, VARIANTS, SPECS)
    assert got == []
    assert rounds == 1


def test_by_point_keeps_rounds_whole_while_time_allows(tmp_path):
    # fast processes: several rounds within ROUND_S = 2 (`ok` counts whole seconds, so at least
    # one second of rounds), each the same sequence with its number
    got, rounds = calls(tmp_path, "ab_rounds_by_point", 2, 100, VARIANTS, SPECS, point_seconds=0.02)
    assert rounds >= 2
    per_round = [(v, *split(s)) for s in SPECS for v in VARIANTS]
    for r in range(1, rounds + 1):
        assert [(c[0], *c[2:]) for c in got if c[1] == str(r)] == per_round


def test_first_specs_join_the_first_rounds_in_each_order(tmp_path):
    first = ["gpt-oss-120b:w4a16:32"]
    for loop, point_major in (("ab_rounds_by_point", True), ("ab_rounds", False)):
        (tmp_path / "calls.txt").unlink(missing_ok=True)
        # 6 processes of 0.4 s within ROUND_S 2: one round, as in the first test
        got, rounds = calls(tmp_path, loop, 2, 100, VARIANTS, SPECS, point_seconds=0.4, first_specs=first)
        specs = SPECS + first
        pairs = [(v, s) for s in specs for v in VARIANTS] if point_major else [(v, s) for v in VARIANTS for s in specs]
        assert rounds == 1, loop
        assert got == [(v, "1", *split(s)) for v, s in pairs], loop


def run_filter_tests(tmp_path, body, timeout):
    """filter_tests on a stand-in test binary whose behaviour is `body` (a shell script)."""
    binary = tmp_path / ".carry" / "bin" / "fp4moe_tests"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n" + body)
    binary.chmod(0o755)
    script = f"""
set -u
OUT={tmp_path}/out
source {LIB}
filter_tests '*x*' runs {timeout}
"""
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_filter_tests_names_the_test_a_hang_stopped_in(tmp_path):
    # a binary that starts two tests and hangs in the second: stopped at the limit, the line
    # names the second
    out = run_filter_tests(
        tmp_path,
        "echo '[ RUN      ] Cases/A.B/one'\necho '[       OK ] Cases/A.B/one (1 ms)'\n"
        "echo '[ RUN      ] Cases/A.B/two'\nsleep 30\n",
        1,
    )
    assert "runs rc=124" in out
    assert "runs timed out after 1 s in Cases/A.B/two" in out


def test_filter_tests_reports_a_finished_run_without_a_timeout_line(tmp_path):
    out = run_filter_tests(
        tmp_path,
        "echo '[ RUN      ] Cases/A.B/one'\necho '[  FAILED  ] Cases/A.B/one (1 ms)'\n"
        "echo '[  PASSED  ] 0 tests.'\necho '[  FAILED  ] 1 test, listed below:'\nexit 1\n",
        30,
    )
    first = out.splitlines()[0]
    assert first.startswith("runs rc=1 ") and "[  PASSED  ] 0 tests." in first
    assert "timed out" not in out
    assert "[  FAILED  ] Cases/A.B/one (1 ms)" in out


NARROW = ["narrow_nvfp4", "narrow_w4a4", "narrow_nvfp4_one_kblock", "narrow_mxfp4_silu"]


def run_race_narrow(tmp_path, race_done, call_s=600):
    """race_narrow with a test binary that lists NARROW and a compute-sanitizer that records its
    filter: the filters it ran, in order, and the lines it printed."""
    carry = tmp_path / ".carry" / "bin"
    carry.mkdir(parents=True)
    listing = "".join(f"echo '  WidthSplitAtEveryWidth/{c}  # GetParam() = x'\n" for c in NARROW)
    stand_in(carry / "fp4moe_tests", "#!/bin/bash\necho 'Narrow/CudaGemmSm90Widths.'\n" + listing)
    bindir = tmp_path / "stubs"
    bindir.mkdir()
    log = tmp_path / "filters.txt"
    stand_in(
        bindir / "compute-sanitizer",
        f"#!/bin/bash\nfor a; do case $a in --gtest_filter=*) echo \"${{a#--gtest_filter=}}\" >> {log};; esac; done\n"
        "echo '========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)'\n",
    )
    done = " ".join(race_done)
    result = source_lib(tmp_path, f'RACE_DONE="{done}" race_narrow {call_s}', bindir, tmp_path / "out")
    assert result.returncode == 0, result.stderr
    filters = log.read_text().splitlines() if log.exists() else []
    return filters, result.stdout


def test_race_narrow_runs_each_case_not_done_in_a_process_of_its_own(tmp_path):
    done = ["narrow_nvfp4", "narrow_mxfp4_silu"]
    filters, out = run_race_narrow(tmp_path, done)
    expected = [f"Narrow/CudaGemmSm90Widths.WidthSplitAtEveryWidth/{c}" for c in NARROW if c not in done]
    assert filters == expected
    assert out.count("rc=0") == len(expected)


def test_race_narrow_starts_nothing_without_time_left(tmp_path):
    filters, out = run_race_narrow(tmp_path, [], call_s=10)  # under the 20 s a case needs
    assert filters == []
    assert out.count("not started (time)") == len(NARROW)


def test_clocks_median_reads_the_clock_and_power_columns(tmp_path):
    rows = [(1410, 650.5), (1755, 701.0), (1500, 699.2), (1980, 120.0), (1620, 690.0)]
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    lines = [f"2026/12/06 10:00:0{i}.000, {mhz} MHz, {w} W, Active, 60" for i, (mhz, w) in enumerate(rows)]
    # nvidia-smi's error lines and a header carry no MHz / W pair and must not count
    (out_dir / "clocks.csv").write_text("\n".join(["timestamp, clocks.sm [MHz]", *lines, "Failed"]) + "\n")
    script = f"OUT={out_dir}\nsource {LIB}\nclocks_median\n"
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    mhz = sorted(m for m, _ in rows)[len(rows) // 2]
    watts = sorted(w for _, w in rows)[len(rows) // 2]
    assert f"SM clock median {mhz} MHz over {len(rows)} samples; power median {watts:.0f} W" in result.stdout


def test_ab_session_runs_by_point_and_reports_against_the_first_variant(tmp_path):
    # stand-ins: nvidia-smi writes two clock rows and waits to be killed; ab_point records its
    # call; ab_report says which base it was given. ab_session must run the rounds point by
    # point, report against the first variant, add the clock median and leave no partial copy.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in(bin_dir / "nvidia-smi", "#!/bin/sh\necho '2026/12/06 10:00:00.000, 1500 MHz, 690.0 W, Active, 60'\n"
             "echo '2026/12/06 10:00:00.200, 1700 MHz, 650.0 W, Active, 60'\nexec sleep 30\n")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    log = tmp_path / "calls.txt"
    body = f"""
ab_point() {{ echo "$1 $2 $3 $4 $5" >> {log}; sleep 0.6; }}
ab_report() {{ echo "report base=$1 rounds=$ab_round"; }}
ab_session 2 100 "{' '.join(VARIANTS)}" "{' '.join(SPECS)}"
"""
    result = source_lib(tmp_path, body, bin_dir, out_dir, timeout=60)
    assert result.returncode == 0, result.stderr
    got = [tuple(line.split()) for line in log.read_text().splitlines()]
    assert got == [(v, "1", *split(s)) for s in SPECS for v in VARIANTS]  # one round, as above
    summary = (out_dir / "ab-summary.txt").read_text()
    assert f"report base={VARIANTS[0]} rounds=1" in summary
    assert "SM clock median 1600.0 MHz over 2 samples; power median 670 W" in summary
    assert not (out_dir / "ab-partial.tgz").exists()


def sanitizer_stand_in(tmp_path, fails=None):
    """A stand-in compute-sanitizer in tmp_path/stubs that appends "TOOL FILTER" to
    tmp_path/runs.txt, prints an error summary naming its tool, and exits 3 (errors found) under
    the tool `fails`: the stubs folder and the log."""
    bindir = tmp_path / "stubs"
    bindir.mkdir()
    log = tmp_path / "runs.txt"
    stand_in(
        bindir / "compute-sanitizer",
        "#!/bin/bash\ntool=; filter=\n"
        "while [ $# -gt 0 ]; do case $1 in --tool) tool=$2; shift;; --gtest_filter=*) filter=${1#--gtest_filter=};; esac; shift; done\n"
        f"echo \"$tool $filter\" >> {log}\necho \"========= ERROR SUMMARY: 0 errors ($tool)\"\n"
        f"[ \"$tool\" = \"{fails or ''}\" ] && exit 3; exit 0\n",
    )
    return bindir, log


def test_sanitizers_runs_memcheck_then_racecheck_over_one_filter(tmp_path):
    # a stand-in compute-sanitizer that records its tool and filter and exits 3 (errors found)
    # under racecheck: one line and one log per tool, each with its own exit status.
    bindir, log = sanitizer_stand_in(tmp_path, fails="racecheck")
    out_dir = tmp_path / "out"
    result = source_lib(tmp_path, "sanitizers 'Cases/A.*' 30", bindir, out_dir)
    assert result.returncode == 0, result.stderr
    assert log.read_text().splitlines() == ["memcheck Cases/A.*", "racecheck Cases/A.*"]
    lines = result.stdout.splitlines()
    assert lines[0].startswith("memcheck rc=0 ") and "(memcheck)" in lines[0]
    assert lines[1].startswith("racecheck rc=3 ") and "(racecheck)" in lines[1]
    assert "(racecheck)" in (out_dir / "racecheck.txt").read_text()


def test_staging_branch_checks_runs_check_points_then_memcheck_over_the_filter_beside_six_jobs(tmp_path):
    # SKIP_SUITE=1 and check_points replaced by a recorder: the points go to check_points, then
    # seven sanitizer processes: memcheck over the branch's filter, and memcheck and racecheck
    # over the same three filters of sanitize_parallel; every job's line printed.
    bindir, log = sanitizer_stand_in(tmp_path)
    out_dir = tmp_path / "out"
    body = (
        f"check_points() {{ echo \"check_points $1 $2\" >> {log}; }}\n"
        "SKIP_SUITE=1 staging_branch_checks br 'm:w4a4:8 m:w4a4:16' 'CudaStaging.*:X.*' 60"
    )
    result = source_lib(tmp_path, body, bindir, out_dir, timeout=60)
    assert result.returncode == 0, result.stderr
    runs = log.read_text().splitlines()
    assert runs[0] == "check_points br m:w4a4:8 m:w4a4:16"
    sans = [tuple(r.split(" ", 1)) for r in runs[1:]]
    assert len(sans) == 7
    assert ("memcheck", "CudaStaging.*:X.*") in sans
    memcheck = sorted(f for t, f in sans if t == "memcheck" and f != "CudaStaging.*:X.*")
    racecheck = sorted(f for t, f in sans if t == "racecheck")
    assert len(memcheck) == 3 and memcheck == racecheck
    job_lines = [line for line in result.stdout.splitlines() if "rc=0" in line]
    assert len(job_lines) == 7 and any(line.startswith("memcheck staging rc=0") for line in job_lines)
    # the seven logs in one archive and the lines in one file: a call returns at most 8 files
    with tarfile.open(out_dir / "sanitize.tgz") as archive:
        names = sorted(archive.getnames())
    assert len(names) == 7 and "memcheck-staging.txt" in names
    assert all(name.startswith(("memcheck-", "racecheck-")) for name in names)
    assert (out_dir / "sanitize-lines.txt").read_text().splitlines() == job_lines
    assert not list(out_dir.glob("*.line")) and not list(out_dir.glob("*check-*.txt"))


PACK = LIB.parent / "pack_carry.py"


@pytest.mark.parametrize("sizes", [(0, 7), (1, 0), (3001, 4099), (65536, 65537)])
def test_pack_both_and_unxz_both_give_back_each_binary_bit_for_bit(tmp_path, sizes):
    # Random bytes (incompressible, so the stream's split point is not guessable from it), the CLI
    # sharing a prefix with the test binary as the real ones share the library.
    rng = random.Random(sum(sizes))
    tests = rng.randbytes(sizes[0])
    cli = tests[: sizes[1] // 2] + rng.randbytes(sizes[1] - sizes[1] // 2)
    bins = tmp_path / "bins"
    bins.mkdir()
    (bins / "fp4moe_tests").write_bytes(tests)
    (bins / "fp4moe").write_bytes(cli)
    packed = tmp_path / ".carry" / "pk"
    subprocess.run(["python3", str(PACK), str(bins), str(packed), "--both"], check=True)
    assert sorted(p.name for p in packed.iterdir()) == ["both.len", "both.xz"]
    result = source_lib(tmp_path, "unxz_both .carry/pk new", tmp_path, tmp_path / "out")
    assert result.returncode == 0, result.stderr
    out_tests, out_cli = tmp_path / ".carry/bin/fp4moe_tests", tmp_path / ".carry/bin/fp4moe_new"
    assert out_tests.read_bytes() == tests
    assert out_cli.read_bytes() == cli
    assert out_tests.stat().st_mode & 0o111 and out_cli.stat().st_mode & 0o111


def test_pack_without_both_writes_one_file_each_that_unxz_gives_back(tmp_path):
    bins = tmp_path / "bins"
    bins.mkdir()
    (bins / "fp4moe_tests").write_bytes(b"tests" * 1000)
    (bins / "fp4moe").write_bytes(b"cli" * 999)
    subprocess.run(["python3", str(PACK), str(bins), str(tmp_path / "pk")], check=True)
    assert sorted(p.name for p in (tmp_path / "pk").iterdir()) == ["cli.xz", "tests.xz"]
    body = "unxz pk/tests.xz t.bin && unxz pk/cli.xz c.bin"
    result = source_lib(tmp_path, body, tmp_path, tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "t.bin").read_bytes() == b"tests" * 1000
    assert (tmp_path / "c.bin").read_bytes() == b"cli" * 999
