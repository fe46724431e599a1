# Compiler flags for spillway's own code: warnings as errors, optional sanitizers.
function(spillway_target_options target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Werror>
    # GCC 12 reports std::string's own copies as overlapping at -O3 (GCC bug 105329, fixed in
    # 13): a Release build would fail on it. Still printed, not an error.
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>,$<VERSION_LESS:$<CXX_COMPILER_VERSION>,13>>:-Wno-error=restrict>)
endfunction()

# Line tables only in the default build type: backtraces, sanitizer reports and profilers need
# no more, and full debug info makes the build slower and the bundle carried to a GPU larger.
add_compile_options($<$<AND:$<CONFIG:RelWithDebInfo>,$<COMPILE_LANGUAGE:CXX,C>>:-g1>)

if(SPILLWAY_SANITIZE)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX,C>:-fsanitize=address,undefined>
                      $<$<COMPILE_LANGUAGE:CXX,C>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:CXX,C>:-fno-sanitize-recover=undefined>
                      # Line tables are all a sanitizer report needs; full debug info doubles the
                      # compile time of this leg, which CI pays on every run. -O1, as the
                      # sanitizers' documentation suggests: a quarter less compile time than -O2.
                      $<$<COMPILE_LANGUAGE:CXX,C>:-g1> $<$<COMPILE_LANGUAGE:CXX,C>:-O1>)
  add_link_options(-fsanitize=address,undefined)
endif()

if(SPILLWAY_TSAN)
  if(SPILLWAY_SANITIZE)
    message(FATAL_ERROR "SPILLWAY_TSAN and SPILLWAY_SANITIZE cannot be on together: ThreadSanitizer "
                        "does not combine with AddressSanitizer; use two build folders")
  endif()
  # -Wno-tsan: GCC warns that TSan does not model std::atomic_thread_fence (the CUPTI correlation
  # table's seqlock uses one); a race it misses there is reported, not hidden.
  add_compile_options($<$<COMPILE_LANGUAGE:CXX,C>:-fsanitize=thread>
                      $<$<COMPILE_LANGUAGE:CXX,C>:-Wno-tsan>)
  add_link_options(-fsanitize=thread)
endif()
