# Installation: `cmake --install BUILD [--prefix DIR]` puts in place
#   bin/sublinear                          the command
#   include/sublinear.h, sublinear/*.h     the headers (one umbrella, topic headers)
#   lib/libsublinear.a (or .so)            the library
#   lib/cmake/sublinear/                   find_package(sublinear) -> sublinear::sublinear
#   lib/pkgconfig/sublinear.pc             pkg-config sublinear
#   libexec/sublinear/bench_*              the bench programs `sublinear bench` runs
# Both package files are relocatable: they find the prefix from where they
# lie, so `--prefix` at install time works without reconfiguring.
#
# The library is static by default (BUILD_SHARED_LIBS=ON builds it shared).
# A static libsublinear.a does not carry its dependencies, so both package
# files name them: the CMake package finds BLAS (OpenBLAS), OpenMP
# (PCRE2 is named by its path in the exported link interface)
# (and CUDA, MPI where built with them) with find_dependency, and
# sublinear.pc lists them in Libs.private (`pkg-config --static --libs`).
# A static library built with the CUDA backend holds it: a program that
# links it needs cudart, cuBLAS, cuDNN and the C++ runtime even if it only
# ever uses the CPU (Libs.private names them); configure with -DSL_CUDA=OFF
# for a CPU-only static library.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(SL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/sublinear)

# A library built with sanitizers needs their runtimes in every program that
# links it: say so in its interface, for this build tree and the install.
if(SL_SANITIZE)
  target_link_options(sublinear INTERFACE -fsanitize=address,undefined)
endif()

# The CUDA objects of a static library are C++ (nvcc): a C program linking
# it with cc needs the C++ runtime named.
if(SL_HAVE_CUDA AND NOT BUILD_SHARED_LIBS)
  target_link_libraries(sublinear INTERFACE stdc++)
endif()

# A shared build: the installed command finds the library beside it.
if(BUILD_SHARED_LIBS)
  set_target_properties(sublinear_cli PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
endif()

install(TARGETS sublinear EXPORT sublinearTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/sublinear.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/sublinear DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
install(TARGETS sublinear_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(bench bench_optnet bench_conv bench_resnet)
  if(TARGET ${bench})
    install(TARGETS ${bench} RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/sublinear)
  endif()
endforeach()

install(EXPORT sublinearTargets NAMESPACE sublinear:: DESTINATION ${SL_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/sublinearConfig.cmake.in
  ${PROJECT_BINARY_DIR}/sublinearConfig.cmake INSTALL_DESTINATION ${SL_CMAKE_DIR})
# 0.x: minor versions may break the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/sublinearConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/sublinearConfig.cmake
  ${PROJECT_BINARY_DIR}/sublinearConfigVersion.cmake DESTINATION ${SL_CMAKE_DIR})

# ---- sublinear.pc ------------------------------------------------------
# The prefix relative to the .pc file's own directory (${pcfiledir}).
set(SL_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH SL_PC_PREFIX_FROM_PCDIR /prefix/${SL_PC_DIR} /prefix)
string(REGEX REPLACE "/$" "" SL_PC_PREFIX_FROM_PCDIR "${SL_PC_PREFIX_FROM_PCDIR}")
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(SL_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(SL_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()

# Turns a list of libraries (full paths, -l flags, bare names) into linker flags.
function(sl_pc_link_flags out)
  set(flags "")
  foreach(lib ${ARGN})
    if(lib MATCHES "^-")
      list(APPEND flags "${lib}")
    elseif(IS_ABSOLUTE "${lib}" AND lib MATCHES "/lib([^/]+)\\.(so|a|dylib)[.0-9]*$")
      get_filename_component(dir "${lib}" DIRECTORY)
      list(APPEND flags "-L${dir}" "-l${CMAKE_MATCH_1}")
    elseif(IS_ABSOLUTE "${lib}")
      list(APPEND flags "${lib}")
    elseif(NOT lib MATCHES "::")
      list(APPEND flags "-l${lib}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES flags)
  string(REPLACE ";" " " flags "${flags}")
  set(${out} "${flags}" PARENT_SCOPE)
endfunction()

set(SL_PC_PRIVATE_LIBS ${BLAS_LIBRARIES} ${OpenMP_C_FLAGS} ${PCRE2_LINK_LIBRARIES})
if(SL_HAVE_CUDA)
  list(APPEND SL_PC_PRIVATE_LIBS ${CUDA_cudart_LIBRARY} ${CUDA_cublas_LIBRARY} ${CUDA_cublasLt_LIBRARY} ${CUDNN_LIB} -lstdc++)
endif()
if(SL_HAVE_ONEDNN)
  list(APPEND SL_PC_PRIVATE_LIBS -ldnnl)
endif()
if(SL_HAVE_NCCL)
  list(APPEND SL_PC_PRIVATE_LIBS ${NCCL_LIB})
endif()
if(SL_HAVE_MPI)
  list(APPEND SL_PC_PRIVATE_LIBS ${MPI_C_LIBRARIES})
endif()
if(SL_SANITIZE)
  list(APPEND SL_PC_PRIVATE_LIBS -fsanitize=address,undefined)
endif()
list(APPEND SL_PC_PRIVATE_LIBS -lm)
sl_pc_link_flags(SL_PC_LIBS_PRIVATE ${SL_PC_PRIVATE_LIBS})
# The installed file is made under pkgconfig-install/ (its paths exist only
# after `cmake --install`); the build tree gets sublinear-uninstalled.pc,
# which pkg-config prefers when PKG_CONFIG_PATH names the build directory:
# headers from the source tree, the library from the build tree.
configure_file(${CMAKE_CURRENT_LIST_DIR}/sublinear.pc.in
  ${PROJECT_BINARY_DIR}/pkgconfig-install/sublinear.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/pkgconfig-install/sublinear.pc DESTINATION ${SL_PC_DIR})
set(SL_PC_PREFIX_FROM_PCDIR ".")
set(SL_PC_LIBDIR "$<TARGET_FILE_DIR:sublinear>")
set(SL_PC_INCLUDEDIR "${PROJECT_SOURCE_DIR}/include")
configure_file(${CMAKE_CURRENT_LIST_DIR}/sublinear.pc.in
  ${PROJECT_BINARY_DIR}/sublinear-uninstalled.pc.in @ONLY)
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/sublinear-uninstalled.pc
  INPUT ${PROJECT_BINARY_DIR}/sublinear-uninstalled.pc.in)
