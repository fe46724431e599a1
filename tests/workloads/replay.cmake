# Tests of the trace replayer (workloads/replay/): reading traces, repeating steps, the arena
# model and written ranges as unit tests; spillway-replay on simgpu with and without spillway.
add_library(replay_test_trace STATIC replay_test_trace.cc)
target_include_directories(replay_test_trace PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(replay_test_trace PUBLIC spillway_trace_writer spillway_common absl::status)
spillway_target_options(replay_test_trace)

# Writes the tests' synthetic job as a trace, to try spillway-replay by hand.
add_executable(replay_make_trace replay_make_trace.cc)
target_link_libraries(replay_make_trace PRIVATE replay_test_trace)
spillway_target_options(replay_make_trace)

# Reading traces, repeating steps, the arena model, written ranges and the kernels' values.
add_executable(replay_unit_test replay_trace_test.cc replay_replayer_test.cc replay_model_test.cc
               replay_results_test.cc)
target_link_libraries(replay_unit_test PRIVATE spillway_replay replay_test_trace spillway_gtest_main)
spillway_target_options(replay_unit_test)
add_test(NAME replay_unit_test COMMAND replay_unit_test)

# spillway-replay on simgpu, under spillway with each policy and without it. Two ctest entries
# over one binary, so that they run side by side.
if(TARGET simgpu AND TARGET spillway)
  add_executable(replay_run_test replay_run_test.cc
                 ${PROJECT_SOURCE_DIR}/tests/integration/subprocess.cc)
  target_compile_definitions(replay_run_test PRIVATE SPILLWAY_TEST_OUT_DIR="${SPILLWAY_OUT_DIR}")
  target_link_libraries(replay_run_test PRIVATE replay_test_trace spillway_gtest_main)
  add_dependencies(replay_run_test simgpu spillway spillway-replay replay_kernels)
  spillway_target_options(replay_run_test)
  add_test(NAME replay_run_policies_test COMMAND replay_run_test "--gtest_filter=Policies/*")
  add_test(NAME replay_run_test COMMAND replay_run_test "--gtest_filter=-Policies/*")
endif()
