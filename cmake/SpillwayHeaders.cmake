# Include walls (docs/architecture.md, "Dependencies"): a walled library does not export the
# source tree as its include path. Its folder's headers are linked, under their paths from the
# source root, into a folder of the build's own (build/include/<folder>/), and that folder is the
# library's include path. A file can then include a header of its own folder or of a library it
# links ("policy/engine/residency_engine.h") and nothing else: including another folder's header
# fails the build with "No such file or directory".

# spillway_folder_headers(TARGET): TARGET's include path is its folder's headers (every *.h in the
# CMakeLists.txt's folder; a header added later appears at the next configure, which
# CONFIGURE_DEPENDS triggers). Several libraries of one folder share one include folder.
function(spillway_folder_headers target)
  file(RELATIVE_PATH folder ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  string(REPLACE "/" "_" key "${folder}")
  set(root ${CMAKE_BINARY_DIR}/include/${key})
  get_property(staged GLOBAL PROPERTY SPILLWAY_STAGED_${key})
  if(NOT staged)
    file(REMOVE_RECURSE ${root})
    file(GLOB headers CONFIGURE_DEPENDS RELATIVE ${CMAKE_CURRENT_SOURCE_DIR}
         ${CMAKE_CURRENT_SOURCE_DIR}/*.h ${CMAKE_CURRENT_SOURCE_DIR}/*.inc)
    file(MAKE_DIRECTORY ${root}/${folder})
    foreach(header IN LISTS headers)
      file(CREATE_LINK ${CMAKE_CURRENT_SOURCE_DIR}/${header} ${root}/${folder}/${header} SYMBOLIC)
    endforeach()
    set_property(GLOBAL PROPERTY SPILLWAY_STAGED_${key} TRUE)
  endif()
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${root}>)
endfunction()
