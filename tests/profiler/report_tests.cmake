# Tests of the report and the Perfetto export (profiler/report/, docs/report.md); included from
# tests/profiler/CMakeLists.txt.
add_executable(report_test ${CMAKE_CURRENT_LIST_DIR}/analysis_test.cc
               ${CMAKE_CURRENT_LIST_DIR}/report_html_test.cc
               ${CMAKE_CURRENT_LIST_DIR}/perfetto_export_test.cc
               ${CMAKE_CURRENT_LIST_DIR}/report_symbolizer_test.cc
               ${CMAKE_CURRENT_LIST_DIR}/analysis_random_test.cc)
target_include_directories(report_test PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(report_test PRIVATE spillway_report spillway_gtest_main ${CMAKE_DL_LIBS}
                      nlohmann_json::nlohmann_json)
spillway_target_options(report_test)
add_test(NAME report_test COMMAND report_test)

# The tools on a trace recorded from examples/oversubscribe on simgpu under the shim.
if(TARGET spillway-report AND TARGET spillway-export AND TARGET spillway AND TARGET simgpu
   AND TARGET oversubscribe)
  add_test(NAME report_recorded_test
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/report_recorded_test.sh ${SPILLWAY_OUT_DIR})
endif()

# Time of the report and the export on long synthetic traces (docs/report.md).
add_executable(report_benchmark ${CMAKE_CURRENT_LIST_DIR}/report_benchmark.cc)
target_include_directories(report_benchmark PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(report_benchmark PRIVATE spillway_report)
spillway_target_options(report_benchmark)
