# Install rules and the CMake package: `cmake --install <build> --prefix <dir>` installs the
# shared library, the public headers, the `kiln` tool and <libdir>/cmake/kiln, so that
#
#   find_package(kiln REQUIRED)
#   target_link_libraries(app PRIVATE kiln::kiln)
#
# is all a program needs. Included at the end of the top-level CMakeLists.txt, after every
# target exists.
include(CMakePackageConfigHelpers)

set(KILN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)

# Installed binaries find libkiln.so next to them, wherever the prefix is.
foreach(kiln_target kiln kiln_tool)
  if(TARGET ${kiln_target})
    set_target_properties(${kiln_target} PROPERTIES
      INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
  endif()
endforeach()
# libkiln.so itself sits in the lib dir: $ORIGIN is enough for anything installed beside it.
if(TARGET kiln)
  set_property(TARGET kiln APPEND PROPERTY INSTALL_RPATH "$ORIGIN")
endif()

install(TARGETS kiln EXPORT kilnTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

if(TARGET kiln_tool)
  install(TARGETS kiln_tool RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
endif()

# Public headers, paths preserved: <kiln/runtime/core/error.h> works in-tree and installed.
# Unit tests (test/) and test helpers (kiln/testing/) are not part of the package.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/kiln/
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln COMPONENT dev
  FILES_MATCHING PATTERN "*.h"
  PATTERN "test" EXCLUDE
  PATTERN "testing" EXCLUDE)
# Generated headers (flatc's program_generated.h) that some installed headers include.
install(DIRECTORY ${KILN_GENERATED_DIR}/kiln/
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln COMPONENT dev
  FILES_MATCHING PATTERN "*.h"
  PATTERN "test" EXCLUDE
  PATTERN "testing" EXCLUDE)

install(EXPORT kilnTargets
  NAMESPACE kiln::
  DESTINATION ${KILN_INSTALL_CMAKEDIR} COMPONENT dev)

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/kilnConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/kilnConfig.cmake
  INSTALL_DESTINATION ${KILN_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
write_basic_package_version_file(
  ${CMAKE_CURRENT_BINARY_DIR}/kilnConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/kilnConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/kilnConfigVersion.cmake
  DESTINATION ${KILN_INSTALL_CMAKEDIR} COMPONENT dev)
