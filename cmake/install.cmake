# `cmake --install build --prefix P` and `cpack -G DEB` (docs/API.md, "Installing"):
#
#   P/bin/wgrt                          the CLI and server
#   P/lib/libwgrt.so(.0.2, .0.2.0)        the C API (wgrt.h), exporting only wgrt_* entry points
#   P/lib/wgrt/dawn.node                Dawn, loaded by both from beside themselves
#   P/include/wgrt/wgrt.h, wgrt.hpp     the C API and its C++ layer
#   P/lib/cmake/wgrt/                   find_package(wgrt): the imported target wgrt::wgrt
#   P/lib/pkgconfig/wgrt.pc             pkg-config --cflags --libs wgrt
#   P/share/wgrt/wgrt-demo-q8_0.gguf    the demo model, run when no model is named
#   P/share/doc/wgrt/                   licences (wgrt's, Dawn's) and the demo model's notes
#   P/lib/python3/dist-packages/wgrt/   the Python package (ctypes over P/lib/libwgrt.so.0.2)
#
# The lib/ and share/ places are fixed (not GNUInstallDirs' multiarch lib/<triple>): the
# programs find Dawn and the demo model one folder up from themselves (support/install_paths.h).
# libwgrt_c.a is not installed: it is wgrt_core's objects without them, usable only inside this
# build; programs outside link libwgrt.so.
include(CMakePackageConfigHelpers)

install(TARGETS wgrt RUNTIME DESTINATION bin)
set_target_properties(wgrt_shared PROPERTIES EXPORT_NAME wgrt)
install(TARGETS wgrt_shared EXPORT wgrtTargets
        LIBRARY DESTINATION lib
        INCLUDES DESTINATION include)
install(FILES include/wgrt/wgrt.h include/wgrt/wgrt.hpp DESTINATION include/wgrt)
if(NOT WGRT_DAWN_INSTALL)
  get_filename_component(_dawn_file "${WGRT_DAWN_NODE_DIR}/dawn.node" REALPATH)
  get_filename_component(_dawn_dir "${WGRT_INSTALL_DAWN}" DIRECTORY)
  install(FILES "${_dawn_file}" DESTINATION "${_dawn_dir}" RENAME dawn.node)
  if(EXISTS "${WGRT_DAWN_NODE_DIR}/LICENSE.md")
    install(FILES "${WGRT_DAWN_NODE_DIR}/LICENSE.md" DESTINATION share/doc/wgrt RENAME dawn-LICENSE.md)
  endif()
endif()
get_filename_component(_demo_dir "${WGRT_INSTALL_DEMO_MODEL}" DIRECTORY)
get_filename_component(_demo_name "${WGRT_INSTALL_DEMO_MODEL}" NAME)
install(FILES "${WGRT_DEMO_MODEL_FILE}" DESTINATION "${_demo_dir}" RENAME "${_demo_name}")
install(FILES LICENSE DESTINATION share/doc/wgrt)
install(FILES models/README.md DESTINATION share/doc/wgrt RENAME demo-model.md)

install(DIRECTORY python/wgrt DESTINATION lib/python3/dist-packages FILES_MATCHING PATTERN "*.py")

install(EXPORT wgrtTargets NAMESPACE wgrt:: DESTINATION lib/cmake/wgrt)
configure_package_config_file(cmake/wgrtConfig.cmake.in "${CMAKE_BINARY_DIR}/wgrtConfig.cmake"
                              INSTALL_DESTINATION lib/cmake/wgrt)
write_basic_package_version_file("${CMAKE_BINARY_DIR}/wgrtConfigVersion.cmake"
                                 COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_BINARY_DIR}/wgrtConfig.cmake" "${CMAKE_BINARY_DIR}/wgrtConfigVersion.cmake"
        DESTINATION lib/cmake/wgrt)
configure_file(cmake/wgrt.pc.in "${CMAKE_BINARY_DIR}/wgrt.pc" @ONLY)
install(FILES "${CMAKE_BINARY_DIR}/wgrt.pc" DESTINATION lib/pkgconfig)

# ---- the .deb: cpack -G DEB in the build folder ------------------------------------------
# Depends: the shared libraries the programs and Dawn link (ldd build/wgrt build/libwgrt.so
# .deps/dawn-node/dawn.node) plus the Vulkan loader Dawn opens at run time; a Vulkan driver is
# recommended (Mesa's lavapipe runs on any CPU).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME wgrt)
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_CONTACT "wgrt developers <wgrt@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "LLM inference on WebGPU (Dawn): CLI, OpenAI-compatible server, C API")
set(CPACK_PACKAGE_DESCRIPTION "wgrt runs GGUF and Hugging Face language models on any Vulkan GPU through
Dawn's WebGPU. This package holds the wgrt program (run, chat, serve), the C library libwgrt.so
with its headers, CMake and pkg-config files, the Python package, Dawn, and a small demo model.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)  # the programs only: install(FILES) of dawn.node keeps the symbol table it needs
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libc6 (>= 2.36), libstdc++6 (>= 12), libgcc-s1, libfmt9, libpcre2-8-0, libutf8proc2, libvulkan1")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "mesa-vulkan-drivers | vulkan-icd")
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)  # a shlibs file and the ldconfig trigger for libwgrt.so.0.2
include(CPack)
