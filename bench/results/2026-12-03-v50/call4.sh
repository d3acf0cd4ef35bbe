#!/usr/bin/env bash
# v50 call 4 (carry [".carry/r50b"]; ~120 s): why --layers 8 read 5-13% slower per call than
# --layers 1 at T = 32-128 on the large presets (call 3). Guess: the power cap. At --layers 1
# the 30 timed replays of kimi-k2 T = 32 take ~35 ms, too short for the clock to fall; at 8 they
# take 8x longer. Test: --layers 1 with 240 replays (the same work as 8 x 30) against --layers 1
# x 30 and --layers 8 x 30, the SM clock and power sampled every 20 ms throughout.
set -u
source scripts/device_lib.sh
unxz .carry/r50b/cli.xz .carry/bin/fp4moe
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.sw_power_cap --format=csv,noheader \
  -lms 20 > $OUT/clocks.csv 2>&1 &
smi=$!
for m in kimi-k2 deepseek-v3; do
  for a in "1 30" "1 240" "8 30"; do
    set -- $a
    echo "$(date +%H:%M:%S.%N) start $m L$1 i$2" >> $OUT/marks.txt
    timeout 100 .carry/bin/fp4moe bench --model $m --tokens 32,128 --iters $2 --warmup 5 --no-check --no-baseline \
      --no-ceilings --layers $1 > $OUT/$m-L$1-i$2.txt 2>&1
    echo "$(date +%H:%M:%S.%N) end $m L$1 i$2" >> $OUT/marks.txt
    echo "$m layers=$1 iters=$2: $(grep -E '^ +(32|128) ' $OUT/$m-L$1-i$2.txt | awk '{print "T="$1" "$2" us"}' | tr '\n' ' ')"
  done
done
kill $smi
echo "clock samples: $(wc -l < $OUT/clocks.csv)"
