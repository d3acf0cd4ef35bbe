#!/usr/bin/env python3
"""Packs a build's GPU binaries for a device call's carry (build_gpu_carry.sh's PACK).

    pack_carry.py BIN_DIR OUT_DIR [--both]

BIN_DIR holds fp4moe_tests and fp4moe. Without --both: OUT_DIR/tests.xz and OUT_DIR/cli.xz
(device_lib.sh's unxz unpacks each). With --both: OUT_DIR/both.xz, the two in one lzma stream
(they share the library's code, so ~12.6 MB where the two files take ~23.6), and OUT_DIR/both.len,
the test binary's length and the CLI's (device_lib.sh's unxz_both splits them).
"""
import lzma
import pathlib
import sys


def pack(bin_dir, out_dir, both):
    bin_dir, out_dir = pathlib.Path(bin_dir), pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tests, cli = ((bin_dir / name).read_bytes() for name in ("fp4moe_tests", "fp4moe"))
    if both:
        (out_dir / "both.len").write_text(f"{len(tests)} {len(cli)}\n")
        with lzma.open(out_dir / "both.xz", "wb", preset=9) as o:
            o.write(tests + cli)
        return
    for data, name in ((tests, "tests"), (cli, "cli")):
        with lzma.open(out_dir / f"{name}.xz", "wb", preset=6) as o:
            o.write(data)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--both"]
    if len(args) != 2:
        sys.exit("usage: pack_carry.py BIN_DIR OUT_DIR [--both]")
    pack(args[0], args[1], "--both" in sys.argv[1:])
