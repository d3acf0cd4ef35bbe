# Sourced by the prepared device scripts (bench/results/*/prepared-*.sh) at the repository root:
#   ok SECONDS          true while fewer than SECONDS have passed since this file was sourced
#   unxz FILE.xz DEST   decompresses a carried binary (python's lzma: the device has no xz) and
#                       makes it executable
# and creates .carry/bin and $OUT/ab.
start=$(date +%s)
ok() { [ $(( $(date +%s) - start )) -lt "$1" ]; }
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" "$1" "$2" && chmod +x "$2"; }
mkdir -p .carry/bin "$OUT/ab"
