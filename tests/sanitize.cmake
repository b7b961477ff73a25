# The sanitizer suite and the fuzzers as CTest entries (issue 15), so that the
# README's test command runs them every day:
#   sanitize_build  builds the clang ASan + UBSan + libFuzzer tree (CPU only) in
#                   build/sanitize (scripts/sanitize-build.sh): a fixture the
#                   others need, so `ctest -R model` does not pay for it
#   sanitize_unit, sanitize_unit_backward
#                   every Catch2 test under the sanitizers, in two halves that
#                   run side by side (the [backward] cases, and the rest), each
#                   long random test drawing one in four of its shapes
#                   (HBMSCOPE_TEST_SHARE, tests/random_shapes.hpp)
#   sanitize_cli, sanitize_cli_sweep, sanitize_cli_limits, sanitize_cli_safety
#                   tests/cli_test.sh, cli_sweep_test.sh, cli_limits_test.sh
#                   and cli_safety_test.sh against the sanitized hbmscope
#   fuzz_NAME       each harness of tests/fuzz/ for HBMSCOPE_FUZZ_SECONDS
# -DHBMSCOPE_SANITIZER_SUITE=OFF leaves them out (no clang, or in a hurry).
option(HBMSCOPE_SANITIZER_SUITE "Run the ASan + UBSan suite and the fuzzers from ctest (needs clang)" ON)
set(HBMSCOPE_FUZZ_SECONDS 20 CACHE STRING "Seconds each fuzzer runs in ctest")
if(HBMSCOPE_SANITIZER_SUITE)
  set(san_dir ${PROJECT_BINARY_DIR}/sanitize)
  add_test(NAME sanitize_build COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/sanitize-build.sh ${san_dir})
  # It compiles with both cores; nothing else runs meanwhile.
  set_tests_properties(sanitize_build PROPERTIES FIXTURES_SETUP sanitize PROCESSORS 2 TIMEOUT 3600
                                                 LABELS sanitize)
  if(CMAKE_CXX_COMPILER_LAUNCHER)
    set_property(TEST sanitize_build PROPERTY ENVIRONMENT "CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}")
  endif()
  # Sanitizer reports name functions and lines when a symbolizer is found.
  find_program(HBMSCOPE_SYMBOLIZER NAMES llvm-symbolizer llvm-symbolizer-14 llvm-symbolizer-15 llvm-symbolizer-16)
  set(san_env "ASAN_OPTIONS=detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1"
              "UBSAN_OPTIONS=print_stacktrace=1")
  if(HBMSCOPE_SYMBOLIZER)
    list(APPEND san_env "ASAN_SYMBOLIZER_PATH=${HBMSCOPE_SYMBOLIZER}" "UBSAN_SYMBOLIZER_PATH=${HBMSCOPE_SYMBOLIZER}")
  endif()
  add_test(NAME sanitize_unit COMMAND ${san_dir}/tests/hbmscope_tests "~[backward]")
  add_test(NAME sanitize_unit_backward COMMAND ${san_dir}/tests/hbmscope_tests "[backward]")
  add_test(NAME sanitize_cli COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_test.sh ${san_dir}/hbmscope)
  add_test(NAME sanitize_cli_sweep COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_sweep_test.sh ${san_dir}/hbmscope)
  add_test(NAME sanitize_cli_limits COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_limits_test.sh ${san_dir}/hbmscope)
  add_test(NAME sanitize_cli_safety COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_safety_test.sh ${san_dir}/hbmscope)
  set_tests_properties(sanitize_unit sanitize_unit_backward sanitize_cli sanitize_cli_sweep sanitize_cli_limits sanitize_cli_safety
                       PROPERTIES FIXTURES_REQUIRED sanitize LABELS sanitize TIMEOUT 1800 ENVIRONMENT "${san_env}")
  set_property(TEST sanitize_unit sanitize_unit_backward APPEND PROPERTY ENVIRONMENT "HBMSCOPE_TEST_SHARE=4")
  file(GLOB fuzzers CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_*.cpp)
  foreach(src ${fuzzers})
    get_filename_component(name ${src} NAME_WE)
    string(REGEX REPLACE "^fuzz_" "" short ${name})
    add_test(NAME ${name} COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/fuzz.sh -n -b ${san_dir}
                                  -t ${HBMSCOPE_FUZZ_SECONDS} ${short})
    math(EXPR limit "${HBMSCOPE_FUZZ_SECONDS} * 3 + 120")
    set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED sanitize LABELS "sanitize;fuzz" TIMEOUT ${limit}
                                            ENVIRONMENT "${san_env}")
  endforeach()
endif()
