# The fuzz targets as tests of the suite (docs/testing.md, "Fuzzing"), labelled fuzz.
# DTRAIN_FUZZ_DIR is the clang build that holds them (build-fuzz, which scripts/setup.sh --sanitize
# builds); each test runs one target through fuzz/run_fuzzer.sh over a copy of its seed corpus,
# made under DTRAIN_FUZZ_DIR/runs/<name>/: every seed, then DTRAIN_FUZZ_SECONDS (default 5) of
# mutations.
include(${CMAKE_CURRENT_LIST_DIR}/targets.cmake)

foreach(name IN LISTS DTRAIN_FUZZ_TARGETS)
  add_test(NAME fuzz.${name}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/run_fuzzer.sh ${DTRAIN_FUZZ_DIR}/${name}_fuzzer
                   ${CMAKE_CURRENT_LIST_DIR}/corpus/${name} ${DTRAIN_FUZZ_DIR}/runs/${name})
  # Above the longest budget run_fuzzer.sh accepts (600 s), plus start-up and the final report; a
  # hang on one input ends the run sooner, through libFuzzer's -timeout.
  set_tests_properties(fuzz.${name} PROPERTIES LABELS fuzz TIMEOUT 660)
endforeach()
