# Install rules: library, headers, CMake package (find_package(xfa)) and pkg-config file.
include(CMakePackageConfigHelpers)

install(TARGETS xfa EXPORT xfaTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(EXPORT xfaTargets NAMESPACE xfa:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/xfa)

configure_package_config_file(cmake/xfaConfig.cmake.in ${PROJECT_BINARY_DIR}/xfaConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/xfa)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/xfaConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/xfaConfig.cmake ${PROJECT_BINARY_DIR}/xfaConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/xfa)

# pkg-config finds the prefix relative to the .pc file, so the install is relocatable.
file(RELATIVE_PATH XFA_PC_TO_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" XFA_PC_TO_PREFIX "${XFA_PC_TO_PREFIX}")
configure_file(cmake/xfa.pc.in ${PROJECT_BINARY_DIR}/xfa.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/xfa.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
