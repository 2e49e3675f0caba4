# cmake --install: the static archives, the public headers, the CLI and a CMake package, so that
# find_package(turbodecode) gives turbodecode::turbodecode (with the CUDA backend when it was
# built). In a build tree that includes this project, turbodecode::turbodecode is an alias.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

add_library(turbodecode::turbodecode ALIAS turbodecode)

set(turbodecode_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/turbodecode)
get_target_property(turbodecode_archives turbodecode INTERFACE_LINK_LIBRARIES)
# Links made from src/ carry directory markers (::@(...)) around the archive names.
list(FILTER turbodecode_archives EXCLUDE REGEX "^::@")
install(TARGETS turbodecode ${turbodecode_archives} EXPORT turbodecodeTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/turbodecode
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS turbodecode_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT turbodecodeTargets NAMESPACE turbodecode:: DESTINATION ${turbodecode_cmake_dir})

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/turbodecodeConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/turbodecodeConfig.cmake
                              INSTALL_DESTINATION ${turbodecode_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/turbodecodeConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/turbodecodeConfig.cmake
              ${PROJECT_BINARY_DIR}/turbodecodeConfigVersion.cmake
        DESTINATION ${turbodecode_cmake_dir})

# A separate CMake project configures and builds against the installed package, then runs. It
# builds with the host's default compiler and flags: not for a cross build, nor against
# sanitizer-instrumented archives.
if(BUILD_TESTING AND NOT CMAKE_CROSSCOMPILING AND NOT TURBODECODE_SANITIZE)
  add_test(NAME installed_package
           COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${PROJECT_BINARY_DIR}
                   -DWORK_DIR=${PROJECT_BINARY_DIR}/installed_package_test
                   -DCONSUMER_DIR=${PROJECT_SOURCE_DIR}/tests/install_consumer
                   -DGENERATOR=${CMAKE_GENERATOR}
                   -P ${CMAKE_CURRENT_LIST_DIR}/test_installed_package.cmake)
  set_tests_properties(installed_package PROPERTIES LABELS cpu)
endif()
