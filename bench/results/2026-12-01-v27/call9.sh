#!/usr/bin/env bash
# v27 call 9: the A/B m16 (main 41da9e1) | full (kChunk = NT), alternated, 3 rounds (call 8 overwrote m16's large-T outputs). W4A16.
set -u
start=$(date +%s)
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
mkdir -p .carry/bin $OUT/ab
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $1 $2 && chmod +x $2; }
unxz .carry/z33/m16.xz .carry/bin/m16; unxz .carry/z33/full.xz .carry/bin/full
run() {  # variant round models...
  local v=$1 r=$2; shift 2
  for m in "$@"; do
    ok 400 || { echo "skip $v $m r$r"; return; }
    timeout 90 .carry/bin/$v bench --model ${m%%:*} --tokens ${m#*:} --iters 40 --no-check --no-baseline --no-ceilings \
      > $OUT/ab/$v-${m%%:*}-r$r.txt 2>&1
    echo "$v ${m%%:*} r$r rc=$? t=$(( $(date +%s) - start ))"
  done
}
BIG="kimi-k2:4096,8192,16384 gpt-oss-120b:16384"
for r in 1 2 3; do run m16 $r $BIG; run full $r $BIG; done
cd $OUT && grep -H "^ *[0-9]" ab/*.txt | awk '{print $1, $2, $3}' && tar czf ab.tgz ab && rm -rf ab
