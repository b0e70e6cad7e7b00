# Registers a GoogleTest binary's tests with ctest one test suite at a time: `ctest -R Suite` runs
# `binary --gtest_filter=Suite.*` in one process. Run as a POST_BUILD step (tests/CMakeLists.txt),
# like CMake's gtest_discover_tests, which registers each test case as a process of its own: in the
# sanitizer build a process's start and its leak check at exit cost about 0.2 s, more than most of
# the suite's 1,000 cases take to run, so one process per case spent two minutes of the gate on it.
#
# Arguments: TEST_EXECUTABLE, CTEST_FILE (the ctest script written), TIMEOUT (seconds, per suite).
# A suite whose every test skipped exits 77 (tests/support/gtest_main.cc): reported as skipped.
execute_process(COMMAND "${TEST_EXECUTABLE}" --gtest_list_tests
                OUTPUT_VARIABLE listing ERROR_VARIABLE errors RESULT_VARIABLE status TIMEOUT 60)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${TEST_EXECUTABLE} --gtest_list_tests failed (${status}): ${errors}")
endif()

string(REPLACE "\n" ";" lines "${listing}")
set(script "")
set(suites 0)
foreach(line IN LISTS lines)
  # A suite's line ends in a dot, after which a typed suite says its type ("  # TypeParam = ...");
  # its tests' lines are indented.
  if(line MATCHES "^([^ ][^ ]*)\\.( .*)?$")
    set(suite "${CMAKE_MATCH_1}")
    string(APPEND script
           "add_test([==[${suite}]==] [==[${TEST_EXECUTABLE}]==] [==[--gtest_filter=${suite}.*]==])\n"
           "set_tests_properties([==[${suite}]==] PROPERTIES TIMEOUT ${TIMEOUT} SKIP_RETURN_CODE 77)\n")
    math(EXPR suites "${suites} + 1")
  endif()
endforeach()
if(suites EQUAL 0)
  message(FATAL_ERROR "${TEST_EXECUTABLE} --gtest_list_tests listed no test suite")
endif()
file(WRITE "${CTEST_FILE}" "${script}")
