# The WebAssembly build (web/) as an ExternalProject configured with the Emscripten toolchain in
# ${KILN_WASM_DIR} (<build>/wasm). Its own ninja decides what is out of date, so it is run on
# every build (a no-op when nothing changed). Debian's em++ needs NODE_PATH=/usr/share/nodejs.
find_program(KILN_EMCMAKE emcmake)
find_program(KILN_NODE node)
if(NOT KILN_EMCMAKE OR NOT KILN_NODE)
  message(FATAL_ERROR "KILN_WITH_WASM needs Emscripten and Node (Debian: emscripten binaryen nodejs; "
                      "bash .ci/install-deps installs them), or configure with -DKILN_WITH_WASM=OFF")
endif()
include(ExternalProject)
set(KILN_WASM_DIR ${CMAKE_BINARY_DIR}/wasm CACHE INTERNAL "")
set(kiln_emenv ${CMAKE_COMMAND} -E env NODE_PATH=/usr/share/nodejs)
ExternalProject_Add(kiln_wasm
  SOURCE_DIR ${PROJECT_SOURCE_DIR}/web
  BINARY_DIR ${KILN_WASM_DIR}
  CONFIGURE_COMMAND ${kiln_emenv} ${KILN_EMCMAKE} ${CMAKE_COMMAND} -S <SOURCE_DIR> -B <BINARY_DIR> -G Ninja
                    -DCMAKE_BUILD_TYPE=MinSizeRel
  BUILD_COMMAND ${kiln_emenv} ${CMAKE_COMMAND} --build <BINARY_DIR>
  INSTALL_COMMAND ""
  BUILD_ALWAYS ON
  USES_TERMINAL_CONFIGURE ON
  USES_TERMINAL_BUILD ON)
