# The recorder of real networks' training steps (workloads/recorder/, Python and PyTorch on the
# CPU): a small CNN recorded for 4 steps, read by spillway-inspect, its records checked, and the
# command line's refusals (recorder_test.py). PyTorch missing fails the test, with the packages to
# install: scripts/setup.sh installs them.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND AND TARGET spillway-inspect)
  add_test(NAME recorder_test
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/recorder_test.py
                   --source ${PROJECT_SOURCE_DIR} --inspect $<TARGET_FILE:spillway-inspect>)
  set_tests_properties(recorder_test PROPERTIES TIMEOUT 300)
endif()
