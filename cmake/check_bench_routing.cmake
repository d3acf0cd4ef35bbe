# Test (ctest CliBenchRouting): the bench's routing is uniform, as issue 4's targets assume.
# Per preset and token count, the experts each of 16 routing sets touches (routed on the host,
# `bench --routing-only`) average within 4% of E (1 - (1 - k/E)^T). A random correction bias
# once made kimi-k2 T = 128 touch 13% fewer experts (311 of 358).
execute_process(COMMAND "${BIN}" bench --all --model kimi-k2,deepseek-v3,qwen3-235b,gpt-oss-120b --tokens 8,32,128
                        --routing-only --sets 16 --json "${JSON}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fp4moe bench --routing-only failed (${rc}): ${out}")
endif()
file(READ "${JSON}" doc)
string(JSON runs LENGTH "${doc}" runs)
if(runs LESS 4)
  message(FATAL_ERROR "expected a run per preset, got ${runs}: ${out}")
endif()
math(EXPR last_run "${runs} - 1")
foreach(r RANGE ${last_run})
  string(JSON preset GET "${doc}" runs ${r} preset)
  string(JSON n LENGTH "${doc}" runs ${r} rows)
  math(EXPR last "${n} - 1")
  foreach(i RANGE ${last})
    string(JSON T GET "${doc}" runs ${r} rows ${i} tokens)
    string(JSON got GET "${doc}" runs ${r} rows ${i} experts_touched)
    string(JSON want GET "${doc}" runs ${r} rows ${i} experts_touched_uniform)
    # CMake's math is integer: compare the values' integer parts.
    string(REGEX REPLACE "^([0-9]+).*$" "\\1" gi "${got}")
    string(REGEX REPLACE "^([0-9]+).*$" "\\1" wi "${want}")
    math(EXPR lo "${wi} * 96 / 100")
    math(EXPR hi "(${wi} + 1) * 104 / 100 + 1")
    if(gi LESS lo OR gi GREATER hi)
      message(FATAL_ERROR "${preset} T=${T}: ${got} experts touched, uniform routing touches ${want}")
    endif()
    message("${preset} T=${T}: ${got} of uniform ${want}")
  endforeach()
endforeach()
