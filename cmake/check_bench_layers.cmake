# Test (ctest CliBenchLayers): `fp4moe bench --layers N` times graphs of N layer calls and
# reports µs per call; `--warmup-ms MS` replays untimed for MS ms first. The option is checked
# first: with --nodes it fails naming --layers (exit 2). Then a run of one call per graph says
# which backend ran (and records layers_per_graph 1, warmup_ms 2000 on CUDA and 0 on the host,
# and its 5 samples per row on one line).
# On a CUDA device: N = 4 with --warmup-ms 50 runs, the JSON records layers_per_graph 4,
# warmup_ms 50 and every row a positive time, with no timing note (a capture that failed falls
# back to direct launches and says so). On the host backends: N = 4 fails naming --layers and
# --warmup-ms 50 fails naming --warmup-ms (exit 2 each).
set(common bench --model qwen3-30b --experts 16 --tokens 1,40 --iters 5 --warmup 1 --no-check --no-baseline
           --no-ceilings)
# The JSON run's layers_per_graph and warmup_ms against what the command line asked for.
function(expect_run doc layers_want warm_want)
  string(JSON layers GET "${doc}" runs 0 layers_per_graph)
  if(NOT layers EQUAL layers_want)
    message(FATAL_ERROR "layers_per_graph is ${layers}, want ${layers_want}")
  endif()
  string(JSON warm GET "${doc}" runs 0 warmup_ms)
  if(NOT warm MATCHES "^${warm_want}(\\.0*)?$")
    message(FATAL_ERROR "warmup_ms is ${warm}, want ${warm_want}")
  endif()
endfunction()

execute_process(COMMAND "${BIN}" ${common} --layers 4 --nodes RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 2 OR NOT out MATCHES "--layers")
  message(FATAL_ERROR "--layers 4 with --nodes: want exit 2 naming --layers, got ${rc}: ${out}")
endif()

execute_process(COMMAND "${BIN}" ${common} --json "${JSON}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fp4moe bench (one call per graph) failed (${rc}): ${out}")
endif()
file(READ "${JSON}" doc)
string(JSON backend GET "${doc}" runs 0 backend)
# The file's per-replay samples, one per timed forward (--iters), each array on one line
# (tools/json_text.hpp).
string(JSON n LENGTH "${doc}" runs 0 rows 0 forward_us)
if(NOT n EQUAL 5 OR NOT doc MATCHES "\n +\"forward_us\": \\[[^\n]+\\],?\n")
  message(FATAL_ERROR "runs[0].rows[0].forward_us: ${n} samples (want 5), or not on one line")
endif()
# the defaults: one call per graph; 2000 ms of replays before the timed ones on CUDA, none on the host
if(backend STREQUAL "cuda")
  expect_run("${doc}" 1 2000)
else()
  expect_run("${doc}" 1 0)
endif()

file(REMOVE "${JSON}")
if(NOT backend STREQUAL "cuda")
  execute_process(COMMAND "${BIN}" ${common} --layers 4 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 2 OR NOT out MATCHES "--layers")
    message(FATAL_ERROR "backend ${backend}: --layers 4 should fail naming --layers (exit 2), got ${rc}: ${out}")
  endif()
  execute_process(COMMAND "${BIN}" ${common} --warmup-ms 50 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 2 OR NOT out MATCHES "--warmup-ms")
    message(FATAL_ERROR "backend ${backend}: --warmup-ms 50 should fail naming --warmup-ms (exit 2), got ${rc}: ${out}")
  endif()
  message("backend ${backend}: --layers 4 and --warmup-ms 50 refused, as expected")
  return()
endif()
execute_process(COMMAND "${BIN}" ${common} --layers 4 --warmup-ms 50 --json "${JSON}" RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fp4moe bench --layers 4 failed (${rc}): ${out}")
endif()
if(out MATCHES "note: forward:")
  message(FATAL_ERROR "the forward was not timed as CUDA graphs: ${out}")
endif()
file(READ "${JSON}" doc)
expect_run("${doc}" 4 50)
string(JSON n LENGTH "${doc}" runs 0 rows)
if(NOT n EQUAL 2)
  message(FATAL_ERROR "${n} rows, want 2 (--tokens 1,40)")
endif()
foreach(i 0 1)
  string(JSON row GET "${doc}" runs 0 rows ${i})
  string(JSON us GET "${row}" forward_us_median)
  if(NOT us MATCHES "^[0-9]+(\\.[0-9]*)?$" OR us MATCHES "^0(\\.0*)?$")
    message(FATAL_ERROR "row ${i}: forward_us_median ${us}, want a positive time")
  endif()
endforeach()
message("backend cuda: --layers 4 --warmup-ms 50 timed, layers_per_graph 4, warmup_ms 50")
