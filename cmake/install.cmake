# `cmake --install`: libtinycoral and its headers, the `tinycoral` command, a CMake package
# (find_package(tinycoral) gives the imported target tinycoral::tinycoral) and a pkg-config file.
include(CMakePackageConfigHelpers)
set(TINYCORAL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tinycoral)

install(TARGETS tinycoral_library EXPORT tinycoralTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/tinycoral DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  PATTERN "*.in" EXCLUDE)
install(FILES ${PROJECT_BINARY_DIR}/include/tinycoral/version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tinycoral)
install(TARGETS tinycoral RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

install(EXPORT tinycoralTargets NAMESPACE tinycoral:: DESTINATION ${TINYCORAL_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/tinycoralConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tinycoralConfig.cmake INSTALL_DESTINATION ${TINYCORAL_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tinycoralConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tinycoralConfig.cmake
  ${PROJECT_BINARY_DIR}/tinycoralConfigVersion.cmake DESTINATION ${TINYCORAL_CMAKE_DIR})

# pkg-config: C and C++ consumers (C++ ones compile with -std=c++20). The prefix is found from
# the .pc file's own place, so `cmake --install --prefix DIR` works for any DIR.
file(RELATIVE_PATH TINYCORAL_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${CMAKE_CURRENT_LIST_DIR}/tinycoral.pc.in ${PROJECT_BINARY_DIR}/tinycoral.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tinycoral.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
