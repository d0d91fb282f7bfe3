# kiln_add_library(NAME <short> SOURCES ... DEPS ...): builds kiln_<short>, aliased
# kiln::<short>, with its public headers in include/ next to this CMakeLists.
function(kiln_add_library short)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  set(target kiln_${short})
  add_library(${target} STATIC ${ARG_SOURCES})
  add_library(kiln::${short} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${short})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${target} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-missing-field-initializers)
  set_property(GLOBAL APPEND PROPERTY KILN_LIBRARIES ${target})
  # Installed headers: a library's include/ folder, where it has one (targets/<t>/target has none:
  # nothing outside the registry calls a target's implementation).
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/include)
    set_property(GLOBAL APPEND PROPERTY KILN_INCLUDE_DIRS ${CMAKE_CURRENT_SOURCE_DIR}/include)
  endif()
endfunction()

# kiln_add_test(<name> SOURCES ... DEPS ... [LABELS ...] [SPLIT <suites> ...]): a Boost.Test
# executable registered with CTest. SPLIT runs a long suite in parallel pieces: each argument (a
# comma-separated list of top-level suites) is its own test, <name>_<first suite>, and <name> runs
# every other suite (a negative filter, so a suite added later is never left out).
function(kiln_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS;SPLIT" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} Boost::unit_test_framework)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/common)
  target_compile_definitions(${name} PRIVATE BOOST_TEST_DYN_LINK)
  set(tests ${name})
  set(rest "")
  foreach(piece ${ARG_SPLIT})
    string(REPLACE "," ";" suites "${piece}")
    list(GET suites 0 first)
    add_test(NAME ${name}_${first} COMMAND ${name} --log_level=test_suite --report_level=short "--run_test=${piece}")
    list(APPEND tests ${name}_${first})
    foreach(suite ${suites})
      list(APPEND rest "!${suite}")
    endforeach()
  endforeach()
  if(rest)
    list(JOIN rest ":" rest)
    add_test(NAME ${name} COMMAND ${name} --log_level=test_suite --report_level=short "--run_test=${rest}")
  else()
    add_test(NAME ${name} COMMAND ${name} --log_level=test_suite --report_level=short)
  endif()
  if(ARG_LABELS)
    set_tests_properties(${tests} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
endfunction()

# kiln_add_module(<short> SOURCES ... [LINK ...] [INCLUDES ...]): libkiln_<short>.so, a module that
# kiln::modules loads the first time the program needs it (kiln/config/modules.h), built into
# <build>/lib/kiln and installed into <libdir>/kiln. It links no Kiln library (their headers'
# inline parts, as kiln::Error, may be used): what it needs of the program comes through the
# table its entry point returns. LINK: the libraries it exists to keep out of programs' start-up.
function(kiln_add_module short)
  cmake_parse_arguments(ARG "" "" "SOURCES;LINK;INCLUDES" ${ARGN})
  set(target kiln_${short})
  add_library(${target} MODULE ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${KILN_MODULE_OUTPUT_DIR})
  target_include_directories(${target} PRIVATE ${ARG_INCLUDES}
    $<TARGET_PROPERTY:kiln_graph,INTERFACE_INCLUDE_DIRECTORIES>
    $<TARGET_PROPERTY:kiln_config,INTERFACE_INCLUDE_DIRECTORIES>)
  target_link_libraries(${target} PRIVATE ${ARG_LINK})
  # What it links statically stays inside it: the archives' symbols hidden, its own references
  # bound within it (a load resolves few symbols by name), unused sections and libraries dropped.
  target_link_options(${target} PRIVATE -Wl,--exclude-libs,ALL -Wl,-Bsymbolic -Wl,--gc-sections -Wl,--as-needed)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-missing-field-initializers)
  install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/kiln)
endfunction()
