# Finds the CUDA driver API header (cuda.h) that simgpu implements and the shim intercepts,
# and enables the CUDA language only when nvcc is present. The CPU build needs cuda.h alone.
find_path(SPILLWAY_CUDA_INCLUDE_DIR cuda.h
  HINTS $ENV{CUDA_HOME}/include $ENV{CUDA_PATH}/include
  PATHS /usr/local/cuda/include /usr/include /opt/cuda/include
  REQUIRED)
add_library(spillway_cuda_headers INTERFACE)
target_include_directories(spillway_cuda_headers SYSTEM INTERFACE ${SPILLWAY_CUDA_INCLUDE_DIR})

option(SPILLWAY_ENABLE_CUDA "Build CUDA kernels when nvcc is found" ON)
include(CheckLanguage)
if(SPILLWAY_ENABLE_CUDA)
  check_language(CUDA)
endif()
if(SPILLWAY_ENABLE_CUDA AND CMAKE_CUDA_COMPILER)
  enable_language(CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  set(SPILLWAY_HAVE_NVCC ON)
else()
  set(SPILLWAY_HAVE_NVCC OFF)
endif()
message(STATUS "spillway: cuda.h in ${SPILLWAY_CUDA_INCLUDE_DIR}; nvcc: ${SPILLWAY_HAVE_NVCC}")
