# Empties the tests' scratch folder before a run: ctest runs this first, as the fixture that every
# test requires (tests/CMakeLists.txt). Usage: cmake -DDIR=<folder> -P reset_scratch.cmake
if(NOT DIR)
  message(FATAL_ERROR "reset_scratch.cmake: pass -DDIR=<the scratch folder>")
endif()
file(REMOVE_RECURSE "${DIR}")
file(MAKE_DIRECTORY "${DIR}")
