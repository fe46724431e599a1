# Tests of the trace format, writer, reader and loader (profiler/trace/, docs/trace-format.md) and
# of the tools built on them; included from tests/profiler/CMakeLists.txt.
add_executable(trace_test ${CMAKE_CURRENT_LIST_DIR}/trace_format_test.cc
               ${CMAKE_CURRENT_LIST_DIR}/trace_writer_test.cc)
target_include_directories(trace_test PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(trace_test PRIVATE spillway_trace_writer spillway_trace_reader
                      spillway_gtest_main ZLIB::ZLIB)
spillway_target_options(trace_test)
add_test(NAME trace_test COMMAND trace_test)

# The record-mode recorder against a fake host (profiler/record/).
add_executable(trace_recorder_test ${CMAKE_CURRENT_LIST_DIR}/trace_recorder_test.cc)
target_link_libraries(trace_recorder_test PRIVATE spillway_recorder spillway_trace_reader
                      spillway_gtest_main)
spillway_target_options(trace_recorder_test)
add_test(NAME trace_recorder_test COMMAND trace_recorder_test)

# The reader's fuzz target replayed over seeds and 50,000 mutations (docs/fuzzing.md).
add_executable(trace_reader_fuzz_replay_test ${CMAKE_CURRENT_LIST_DIR}/trace_reader_fuzz_test.cc
               ${PROJECT_SOURCE_DIR}/profiler/trace/trace_reader_fuzz.cc)
target_include_directories(trace_reader_fuzz_replay_test PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(trace_reader_fuzz_replay_test PRIVATE spillway_trace_writer
                      spillway_trace_reader spillway_gtest_main)
spillway_target_options(trace_reader_fuzz_replay_test)
add_test(NAME trace_reader_fuzz_replay_test COMMAND trace_reader_fuzz_replay_test)

if(TARGET spillway_report_loader)
  add_executable(trace_loader_test ${CMAKE_CURRENT_LIST_DIR}/trace_loader_test.cc)
  target_include_directories(trace_loader_test PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(trace_loader_test PRIVATE spillway_report_loader spillway_trace_writer
                        spillway_gtest_main)
  spillway_target_options(trace_loader_test)
  add_test(NAME trace_loader_test COMMAND trace_loader_test)

  # The synthetic trace as a file, and the three tools on it.
  add_executable(trace_synthetic_writer ${CMAKE_CURRENT_LIST_DIR}/trace_synthetic_writer.cc)
  target_include_directories(trace_synthetic_writer PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(trace_synthetic_writer PRIVATE spillway_report spillway_trace_writer)
  set_target_properties(trace_synthetic_writer PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                                                          ${CMAKE_CURRENT_BINARY_DIR})
  spillway_target_options(trace_synthetic_writer)
  add_test(NAME trace_tools_test
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/trace_tools_test.sh ${SPILLWAY_OUT_DIR}
                   ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(trace_tools_test PROPERTIES REQUIRED_FILES
                       "${SPILLWAY_OUT_DIR}/spillway-inspect")
  # spillway-plan, spillway-simulate and spillway-inspect on bad input: one line each.
  add_test(NAME plan_tools_test
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/plan_tools_test.sh ${SPILLWAY_OUT_DIR}
                   ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(plan_tools_test PROPERTIES REQUIRED_FILES
                       "${SPILLWAY_OUT_DIR}/spillway-plan;${SPILLWAY_OUT_DIR}/spillway-simulate")
endif()

# The writer's cost per record, one and four threads (docs/benchmarks.md).
if(SPILLWAY_BUILD_BENCHMARKS)
  add_executable(trace_writer_benchmark ${CMAKE_CURRENT_LIST_DIR}/trace_writer_benchmark.cc)
  target_include_directories(trace_writer_benchmark PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(trace_writer_benchmark PRIVATE spillway_trace_writer benchmark::benchmark)
  spillway_target_options(trace_writer_benchmark)
endif()
