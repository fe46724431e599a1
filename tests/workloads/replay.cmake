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
