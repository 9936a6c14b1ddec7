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

# kiln_test_as_avx2(TARGET): runs the GoogleTest executable TARGET once more, whole, with oneDNN
# held to AVX2 (ONEDNN_MAX_CPU_ISA), which kernel selection follows too: on an AVX-512 CPU this
# checks the plans and kernels an AVX2 CPU gets. Elsewhere it repeats the run as the CPU is.
function(kiln_test_as_avx2 target)
  add_test(NAME ${target}_as_avx2 COMMAND ${target} --gtest_brief=1)
  set_tests_properties(${target}_as_avx2 PROPERTIES ENVIRONMENT ONEDNN_MAX_CPU_ISA=AVX2
                                                    LABELS unit TIMEOUT 1200)
endfunction()
