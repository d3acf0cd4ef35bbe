# Test (ctest CliBenchZeroTokens): `fp4moe bench --zero-tokens F` zeroes the hidden states of a
# fraction F of the tokens, evenly spread, and leaves the others' values as they were. At T = 8
# the check samples every token, so its reference RMS (over the checked outputs) says it: with
# F = 1 every output of a bias-free preset (qwen3-30b: silu(0) * 0 = 0) is zero, RMS 0, and the
# check passes; with F = 0.5 half the tokens keep their outputs, so the RMS lies strictly between
# 0 and F = 0's. The JSON records the fraction; F = 1.5 is refused naming --zero-tokens.
set(common bench --model qwen3-30b --experts 16 --tokens 8 --iters 1 --warmup 0 --sets 1 --check --no-baseline
           --no-ceilings)
function(rms_at fraction out_var)
  execute_process(COMMAND "${BIN}" ${common} --zero-tokens ${fraction} --json "${JSON}" RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "fp4moe bench --zero-tokens ${fraction} failed (${rc}): ${out}")
  endif()
  file(READ "${JSON}" doc)
  string(JSON zt GET "${doc}" runs 0 zero_tokens)
  if(NOT zt EQUAL fraction)
    message(FATAL_ERROR "zero_tokens is ${zt}, want ${fraction}")
  endif()
  string(JSON pass GET "${doc}" runs 0 rows 0 check pass)
  string(JSON tokens GET "${doc}" runs 0 rows 0 check tokens)
  if(NOT pass OR NOT tokens EQUAL 8)
    message(FATAL_ERROR "--zero-tokens ${fraction}: check pass ${pass} over ${tokens} tokens, want a pass over 8")
  endif()
  string(JSON rms GET "${doc}" runs 0 rows 0 check reference_rms)
  set(${out_var} ${rms} PARENT_SCOPE)
endfunction()
rms_at(0 rms0)
rms_at(0.5 rms_half)
rms_at(1 rms1)
if(NOT rms1 EQUAL 0)
  message(FATAL_ERROR "--zero-tokens 1: reference RMS ${rms1}, want 0 (every output zero)")
endif()
if(NOT (rms_half GREATER 0 AND rms_half LESS rms0))
  message(FATAL_ERROR "--zero-tokens 0.5: reference RMS ${rms_half}, want strictly between 0 and F = 0's ${rms0}")
endif()
execute_process(COMMAND "${BIN}" ${common} --zero-tokens 1.5 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc EQUAL 0 OR NOT out MATCHES "--zero-tokens")
  message(FATAL_ERROR "--zero-tokens 1.5: want a failure naming --zero-tokens, got ${rc}: ${out}")
endif()
message("--zero-tokens: reference RMS ${rms0} / ${rms_half} / ${rms1} at 0 / 0.5 / 1; 1.5 refused")
