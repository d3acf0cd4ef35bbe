# Test (ctest CliBenchCommit): `fp4moe bench --json` records the commit the binary was built
# from. In a git checkout that is a commit of SRC's history, at or before HEAD (HEAD may have
# moved on since the build), with "-dirty" only as a suffix; outside one the test is skipped.
# The same run's setup_seconds are checked first.
execute_process(COMMAND git -C "${SRC}" rev-parse HEAD RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
if(NOT rc EQUAL 0)
  message("not a git checkout: nothing to compare")
  return()  # ctest counts this as a pass; the stamp is "unknown" there by design
endif()
# Run where git finds no repository (GIT_DIR names none), so that only the build stamp can
# name the commit: the bench's fallback asks git where it runs.
execute_process(COMMAND ${CMAKE_COMMAND} -E env GIT_DIR=/nonexistent-fp4moe-git
                        "${BIN}" bench --model qwen3-30b --experts 8 --tokens 1 --iters 1 --warmup 0 --no-check
                        --no-baseline --json "${JSON}"
                WORKING_DIRECTORY / RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fp4moe bench failed (${rc}): ${out}")
endif()
file(READ "${JSON}" doc)
# The run also records its setup's phases (seconds, non-negative, in the order they ran).
foreach(phase inputs routing_touched synthetic_checkpoint prepare free_checkpoint)
  string(JSON sec ERROR_VARIABLE err GET "${doc}" runs 0 setup_seconds ${phase})
  if(err OR NOT sec MATCHES "^[0-9]+(\\.[0-9]*)?$")
    message(FATAL_ERROR "runs[0].setup_seconds.${phase} is '${sec}' (${err}): want a non-negative number")
  endif()
endforeach()
string(JSON commit GET "${doc}" git_commit)
string(REGEX REPLACE "-dirty$" "" clean "${commit}")
if(clean STREQUAL "unknown" OR clean STREQUAL "")
  message(FATAL_ERROR "git_commit is '${commit}' in a git checkout: the build stamp is missing")
endif()
execute_process(COMMAND git -C "${SRC}" merge-base --is-ancestor "${clean}" HEAD RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "git_commit '${commit}' is not a commit at or before HEAD of ${SRC}")
endif()
message("git_commit ${commit}")
