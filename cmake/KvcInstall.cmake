# Install rules: headers, the core library, a CMake package (kvcompress::kvc)
# with a version file, and a pkg-config file.
#
#   cmake -S . -B b -DKVC_BUILD_ORACLE=OFF -DKVC_BUILD_APPS=OFF -DKVC_BUILD_TESTS=OFF
#   cmake --build b && cmake --install b --prefix p
#   find_package(kvcompress 0.1 CONFIG REQUIRED)   ->   target_link_libraries(app PRIVATE kvcompress::kvc)
#   cc app.c $(pkg-config --cflags --libs kvcompress)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(KVC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kvcompress)
install(TARGETS kvc EXPORT kvcompressTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/core/include/kvc DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(EXPORT kvcompressTargets NAMESPACE kvcompress:: FILE kvcompressTargets.cmake DESTINATION ${KVC_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kvcompress-config.cmake.in
                              ${PROJECT_BINARY_DIR}/kvcompress-config.cmake INSTALL_DESTINATION ${KVC_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kvcompress-config-version.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kvcompress-config.cmake ${PROJECT_BINARY_DIR}/kvcompress-config-version.cmake
        DESTINATION ${KVC_CMAKE_DIR})

# pkg-config: paths relative to the file's own folder, so that a prefix given
# at install time (cmake --install --prefix) is honoured
string(REGEX REPLACE "[^/]+" ".." KVC_PC_UP "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
if(KVC_LIBM)
  set(KVC_PC_LIBS "-lm") # a static library: its dependencies belong in Libs
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/kvcompress.pc.in ${PROJECT_BINARY_DIR}/kvcompress.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kvcompress.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
