# `cmake --install build --prefix P` and the CPack .deb. What is installed:
#   P/bin/spillway                    the launcher
#   P/lib/spillway/                   what a job loads and the launcher runs, together as in
#                                     build/out (RPATH $ORIGIN): libspillway.so, spillway-wait,
#                                     spillway-doctor, the tools and the libraries they load;
#                                     simgpu in simgpu/
#   P/lib/libspillway.so              a link to lib/spillway/libspillway.so
#   P/lib/libspillway_attention.so    the attention kernels, with P/include/spillway/
#   P/lib/cmake/spillway/             spillway-config.cmake: find_package(spillway) gives
#                                     spillway::attention
include(CMakePackageConfigHelpers)

install(TARGETS spillway_launcher RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(TARGETS spillway LIBRARY DESTINATION ${SPILLWAY_INSTALL_BUNDLE} COMPONENT runtime)
foreach(tool spillway-wait spillway-doctor spillway-plan spillway-simulate spillway-inspect
             spillway-report spillway-export spillway-replay)
  if(TARGET ${tool})
    install(TARGETS ${tool} RUNTIME DESTINATION ${SPILLWAY_INSTALL_BUNDLE} COMPONENT runtime)
  endif()
endforeach()
# Libraries loaded from that folder at run time: the CUPTI injection library (record mode) and
# spillway-replay's kernels (a simgpu host library, and a fatbin where nvcc built one).
foreach(library spillway_cupti_injection replay_kernels)
  if(TARGET ${library})
    install(TARGETS ${library} LIBRARY DESTINATION ${SPILLWAY_INSTALL_BUNDLE} COMPONENT runtime)
  endif()
endforeach()
if(TARGET replay_kernels_fatbin)
  install(FILES ${SPILLWAY_OUT_DIR}/replay_kernels.fatbin DESTINATION ${SPILLWAY_INSTALL_BUNDLE}
          COMPONENT runtime)
endif()
if(TARGET simgpu)
  install(TARGETS simgpu LIBRARY DESTINATION ${SPILLWAY_INSTALL_BUNDLE}/simgpu
          NAMELINK_SKIP COMPONENT runtime)
endif()
install(CODE "file(CREATE_LINK spillway/libspillway.so
                   \$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/libspillway.so
                   SYMBOLIC)" COMPONENT runtime)

install(TARGETS spillway_attention EXPORT spillwayTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/attention_kernels/include/spillway
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT runtime)
set_target_properties(spillway_attention PROPERTIES EXPORT_NAME attention)
install(EXPORT spillwayTargets NAMESPACE spillway::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/spillway COMPONENT runtime)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/spillway-config.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/spillway-config.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/spillway
                              PATH_VARS CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/spillway-config-version.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/spillway-config.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/spillway-config-version.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/spillway COMPONENT runtime)

set(CPACK_PACKAGE_NAME spillway)
set(CPACK_PACKAGE_VENDOR "spillway")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Runs CUDA jobs that need more device memory than the GPU has")
set(CPACK_PACKAGE_CONTACT "spillway maintainers")
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
# What its programs and libraries link (ldd): Debian's Abseil, zlib, the C and C++ runtimes.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libc6, libstdc++6, libgcc-s1, libabsl20220623, zlib1g")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
include(CPack)
