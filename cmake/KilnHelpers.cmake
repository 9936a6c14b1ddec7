# kiln_component(NAME SOURCES...): an OBJECT library for one folder. Its objects all end up in
# the shared `kiln` library, so static registrations (kernels, backends) are never dropped.
function(kiln_component name)
  add_library(${name} OBJECT ${ARGN})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR} ${KILN_GENERATED_DIR})
endfunction()

# kiln_test(NAME SOURCES... [LIBS libs...]): a GoogleTest executable registered with CTest,
# linked against the shared kiln library and the test helpers.
function(kiln_test name)
  cmake_parse_arguments(ARG "" "" "LIBS" ${ARGN})
  add_executable(${name} ${ARG_UNPARSED_ARGUMENTS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR} ${KILN_GENERATED_DIR})
  target_link_libraries(${name} PRIVATE kiln kiln_testing GTest::gtest GTest::gmock
                                        GTest::gtest_main ${ARG_LIBS})
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60
                       PROPERTIES LABELS unit)
endfunction()
