# Compiler flags for spillway's own code: warnings as errors, optional sanitizers.
function(spillway_target_options target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Werror>)
endfunction()

if(SPILLWAY_SANITIZE)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX,C>:-fsanitize=address,undefined>
                      $<$<COMPILE_LANGUAGE:CXX,C>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:CXX,C>:-fno-sanitize-recover=undefined>)
  add_link_options(-fsanitize=address,undefined)
endif()
