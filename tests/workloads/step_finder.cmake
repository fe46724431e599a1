# The step finder over every recorded model (workloads/traces/).
add_executable(step_finder_test ${CMAKE_CURRENT_LIST_DIR}/step_finder_test.cc)
target_include_directories(step_finder_test PRIVATE ${PROJECT_SOURCE_DIR})
target_compile_definitions(step_finder_test PRIVATE
                           SPILLWAY_TRACES_DIR="${PROJECT_SOURCE_DIR}/workloads/traces")
target_link_libraries(step_finder_test PRIVATE spillway_planner_workloads spillway_gtest_main)
spillway_target_options(step_finder_test)
add_test(NAME step_finder_test COMMAND step_finder_test)
