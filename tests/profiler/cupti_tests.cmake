# Tests of CUPTI recording (profiler/cupti/, docs/profile-cupti.md); included from
# tests/profiler/CMakeLists.txt when spillway_cupti is built (cupti.h found). The CPU tests use
# hand-made records and a fake libcupti; cupti_gpu_test needs a real GPU (label `gpu`).
add_executable(cupti_convert_test ${CMAKE_CURRENT_LIST_DIR}/cupti_convert_test.cc)
target_link_libraries(cupti_convert_test PRIVATE spillway_cupti spillway_gtest_main)
spillway_target_options(cupti_convert_test)
add_test(NAME cupti_convert_test COMMAND cupti_convert_test)

# The fake libcupti: a shared library the recorder dlopens like the real one.
add_library(fake_cupti SHARED ${CMAKE_CURRENT_LIST_DIR}/fake_cupti.cc)
target_include_directories(fake_cupti SYSTEM PRIVATE ${SPILLWAY_CUPTI_INCLUDE_DIR})
target_link_libraries(fake_cupti PRIVATE spillway_cuda_headers)
set_target_properties(fake_cupti PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${SPILLWAY_OUT_DIR}/testing)
spillway_target_options(fake_cupti)

add_executable(cupti_recorder_test ${CMAKE_CURRENT_LIST_DIR}/cupti_recorder_test.cc)
target_link_libraries(cupti_recorder_test PRIVATE spillway_cupti GTest::gmock
                      spillway_gtest_main ${CMAKE_DL_LIBS})
target_compile_definitions(cupti_recorder_test PRIVATE
                           FAKE_CUPTI_PATH="$<TARGET_FILE:fake_cupti>")
add_dependencies(cupti_recorder_test fake_cupti)
spillway_target_options(cupti_recorder_test)
add_test(NAME cupti_recorder_test COMMAND cupti_recorder_test)

# The real libcupti against simgpu's libcuda.so.1: it must fail cleanly (said once, no crash).
if(TARGET simgpu)
  add_executable(cupti_simgpu_test ${CMAKE_CURRENT_LIST_DIR}/cupti_simgpu_test.cc)
  target_link_libraries(cupti_simgpu_test PRIVATE spillway_cupti spillway_gtest_main
                        ${CMAKE_DL_LIBS})
  add_dependencies(cupti_simgpu_test simgpu)
  spillway_target_options(cupti_simgpu_test)
  add_test(NAME cupti_simgpu_test COMMAND cupti_simgpu_test)
  set_tests_properties(cupti_simgpu_test PROPERTIES
                       ENVIRONMENT "LD_LIBRARY_PATH=${SPILLWAY_SIMGPU_DIR}" TIMEOUT 60)
endif()

# On a real GPU with CUPTI (scripts/gpu_check.sh runs the `gpu` label): kernel times, UVM counters.
add_executable(cupti_gpu_test ${CMAKE_CURRENT_LIST_DIR}/cupti_gpu_test.cc)
target_link_libraries(cupti_gpu_test PRIVATE spillway_cupti spillway_gtest_main ${CMAKE_DL_LIBS})
spillway_target_options(cupti_gpu_test)
add_test(NAME cupti_gpu_test COMMAND cupti_gpu_test)
set_tests_properties(cupti_gpu_test PROPERTIES LABELS gpu)

# The sink that writes to a trace, read back with the reader.
if(TARGET spillway_cupti_trace_sink AND TARGET spillway_trace_reader)
  add_executable(cupti_trace_sink_test ${CMAKE_CURRENT_LIST_DIR}/cupti_trace_sink_test.cc)
  target_link_libraries(cupti_trace_sink_test PRIVATE spillway_cupti_trace_sink
                        spillway_trace_reader spillway_gtest_main)
  spillway_target_options(cupti_trace_sink_test)
  add_test(NAME cupti_trace_sink_test COMMAND cupti_trace_sink_test)
endif()

# The CUDA_INJECTION64_PATH library with the fake libcupti, and its exported symbols.
if(TARGET spillway_cupti_injection AND TARGET spillway_trace_reader)
  add_executable(cupti_injection_test ${CMAKE_CURRENT_LIST_DIR}/cupti_injection_test.cc)
  target_include_directories(cupti_injection_test SYSTEM PRIVATE ${SPILLWAY_CUPTI_INCLUDE_DIR})
  target_link_libraries(cupti_injection_test PRIVATE spillway_trace_reader spillway_cuda_headers
                        spillway_gtest_main ${CMAKE_DL_LIBS})
  target_compile_definitions(cupti_injection_test PRIVATE
                             FAKE_CUPTI_PATH="$<TARGET_FILE:fake_cupti>"
                             INJECTION_PATH="$<TARGET_FILE:spillway_cupti_injection>")
  add_dependencies(cupti_injection_test fake_cupti spillway_cupti_injection)
  spillway_target_options(cupti_injection_test)
  add_test(NAME cupti_injection_test COMMAND cupti_injection_test)
  add_test(NAME cupti_injection_exports_test
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/cupti_injection_exports_test.sh
                   $<TARGET_FILE:spillway_cupti_injection>)
endif()

# The launch-path cost of the correlation (docs/profile-cupti.md): a program printing a table.
if(SPILLWAY_BUILD_BENCHMARKS)
  add_executable(cupti_correlation_benchmark ${CMAKE_CURRENT_LIST_DIR}/cupti_correlation_benchmark.cc)
  target_link_libraries(cupti_correlation_benchmark PRIVATE spillway_cupti benchmark::benchmark)
  spillway_target_options(cupti_correlation_benchmark)
endif()
