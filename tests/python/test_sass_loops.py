"""scripts/sass_loops.py: the opcode counts of inner loops on a synthetic cuobjdump dump.

The dump below has the shapes of a warp-specialized kernel's code: an outer loop (the units)
around the k loop, whose barrier wait branches to an out-of-line retry past the kernel's end
that spins on itself (an inner loop with no MMA) and jumps back into the k loop (a backward
branch whose span holds the spin: not an inner loop). The expected counts are written out by
hand from the listing.
"""
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "sass_loops.py"

KERNEL = "_Z6kernelILi8EEvv"
OTHER = "_Z5otherv"


def sass(name, lines):
    """One function of a cuobjdump -sass dump: lines are (address, instruction)."""
    body = "".join(f"        /*{a:04x}*/                   {ins} ;                  /* 0x000fe20000000f00 */\n"
                   for a, ins in lines)
    return f"\n\t\tFunction : {name}\n\t.headerflags\t@\"EF_CUDA_SM90\"\n{body}"


CODE = [
    (0x0000, "MOV R1, c[0x0][0x28]"),
    # the unit loop: 0x0010 .. 0x00c0
    (0x0010, "S2UR UR4, SR_CgaCtaId"),
    # the k loop: 0x0020 .. 0x00a0
    (0x0020, "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R4"),
    (0x0030, "@!P0 BRA 0x0100"),
    (0x0040, "@!PT LDS RZ, [RZ]"),
    (0x0050, "LDS.128 R4, [R5+UR8]"),
    (0x0060, "PRMT R8, R11, R4, 0x81800100"),
    (0x0070, "HMUL2.BF16_V2 R8, R8, R9.H0_H0"),
    (0x0080, "HGMMA.64x48x16.F32.BF16 R24, R8, gdesc[UR16], R24, gsb0"),
    (0x0090, "@P1 SYNCS.ARRIVE.TRANS64.A1T0 RZ, [UR5], RZ"),
    (0x00a0, "@!P2 BRA 0x0020"),
    (0x00b0, "IADD3 R2, R2, 0x1, RZ"),
    (0x00c0, "@P3 BRA 0x0010"),
    (0x00d0, "EXIT"),
    # the wait's retry: spins on itself, then jumps back into the k loop
    (0x0100, "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R4"),
    (0x0110, "@!P0 BRA 0x0100"),
    (0x0120, "BRA 0x0040"),
]


def run(tmp_path, *args):
    dump = tmp_path / "k.sass"
    dump.write_text("\n\tcode for sm_90a" + sass(KERNEL, CODE) + sass(OTHER, CODE))
    result = subprocess.run([sys.executable, str(SCRIPT), str(dump), *args], capture_output=True, text=True,
                            check=True)
    return result.stdout


def test_k_loop_counted_by_opcode(tmp_path):
    out = run(tmp_path, "kernel")
    assert OTHER not in out  # the filter
    assert f"{KERNEL}: 17 instructions" in out
    # Only the k loop: the unit loop and the retry's jump back span it, the retry's spin has no MMA.
    assert out.count("  loop ") == 1
    assert "loop 0x20-0xa0: 9 instructions, 1 MMA" in out
    counts = dict(part.rsplit(" ", 1) for part in out.strip().splitlines()[-1].strip().split(", "))
    assert counts == {"SYNCS": "2", "BRA": "2", "LDS": "2", "PRMT": "1", "HMUL2": "1", "HGMMA": "1"}


def test_all_lists_loops_without_mma(tmp_path):
    out = run(tmp_path, "kernel", "--all")
    assert "loop 0x20-0xa0: 9 instructions, 1 MMA" in out
    assert "loop 0x100-0x110: 2 instructions, 0 MMA" in out
    assert out.count("  loop ") == 2


def test_nested_lists_every_loop(tmp_path):
    out = run(tmp_path, "kernel", "--nested")
    assert "loop 0x10-0xc0: 12 instructions, 1 MMA, nested" in out  # the unit loop holds the k loop
    assert "loop 0x20-0xa0: 9 instructions, 1 MMA\n" in out
    assert "loop 0x40-0x120: 13 instructions, 1 MMA, nested" in out  # the retry's jump back: 0x40-0xd0, 0x100-0x120
    assert "loop 0x100-0x110: 2 instructions, 0 MMA\n" in out
    assert out.count("  loop ") == 4


def test_no_arguments_prints_usage():
    result = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 2
    assert "sass_loops.py" in result.stdout


def test_against_pairs_kernels_by_name_and_template_arguments(tmp_path):
    # B: the same kernel in an anonymous namespace (its mangled name differs), one instruction
    # fewer in its k loop; `other` in both, left out by the filter.
    a, b = tmp_path / "a.sass", tmp_path / "b.sass"
    fewer = [line for line in CODE if line[0] != 0x0070]
    a.write_text("\n\tcode for sm_90a" + sass(KERNEL, CODE) + sass(OTHER, CODE))
    b.write_text("\n\tcode for sm_90a" + sass("_ZN12_GLOBAL__N_16kernelILi8EEEvv", fewer) + sass(OTHER, CODE))
    out = subprocess.run([sys.executable, str(SCRIPT), str(a), "kernel", "--against", str(b)], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip().splitlines() == ["kernel<8>: loop 0: 9 -> 8 (-1)"]
    both = subprocess.run([sys.executable, str(SCRIPT), str(a), "--against", str(b)], capture_output=True, text=True,
                          check=True).stdout
    assert "_Z5otherv: loop 0: 9 -> 9 (+0)" in both


def test_short_name_reads_template_arguments():
    sys.path.insert(0, str(SCRIPT.parent))
    import sass_loops

    rsws = ("_ZN6fp4moe4cuda58_GLOBAL__N__2f6e786d_25_gemm_sm90_gemm1_widths_cu_d5c0626b14sm90_rsws_gemm"
            "ILi8ELb1ELi4ELb0ELi6EEEvNS0_11sm90_detail6ParamsENS3_10WeightMapsE")
    assert sass_loops.short_name(rsws) == "sm90_rsws_gemm<8,1,4,0,6>"
    # a namespace whose name ends in digits before the kernel's length ('4sm80' '17sm80_grouped_gemm')
    assert sass_loops.short_name("_ZN6fp4moe4cuda4sm8017sm80_grouped_gemmILi2ELb0ELb1ELb0EEEvNS1_6ParamsE") == \
        "sm80_grouped_gemm<2,0,1,0>"
    assert sass_loops.short_name(OTHER) == OTHER
    # a type among the arguments: the short name would drop it, so the mangled name stays
    typed = "_Z6kernelILi8EfEvv"
    assert sass_loops.short_name(typed) == typed


def test_against_keeps_kernels_apart_that_share_a_short_name(tmp_path):
    # kernel<8> in two namespaces of one object: each keyed by its mangled name, none dropped
    a = tmp_path / "a.sass"
    twin = "_ZN1n6kernelILi8EEEvv"
    a.write_text("\n\tcode for sm_90a" + sass(KERNEL, CODE) + sass(twin, CODE))
    out = subprocess.run([sys.executable, str(SCRIPT), str(a), "kernel", "--against", str(a)], capture_output=True,
                         text=True, check=True).stdout
    assert sorted(out.strip().splitlines()) == sorted([f"{KERNEL}: loop 0: 9 -> 9 (+0)",
                                                       f"{twin}: loop 0: 9 -> 9 (+0)"])
