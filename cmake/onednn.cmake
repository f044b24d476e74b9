# oneDNN for the CPU backend's convolutions and GEMMs (src/cpu/cpu_onednn.c):
# used when Debian's libdnnl-dev (oneDNN 2.x, OpenMP threading) is found and
# SL_ONEDNN=ON (the default). Without it the CPU backend runs im2col +
# OpenBLAS as before, and the tests of the oneDNN path say they skip.
set(SL_HAVE_ONEDNN OFF)
if(SL_ONEDNN)
  find_package(dnnl CONFIG QUIET)
  if(dnnl_FOUND)
    set(SL_HAVE_ONEDNN ON)
    message(STATUS "sublinear: oneDNN ${dnnl_VERSION} for CPU convolutions and GEMMs")
    target_compile_definitions(sublinear PRIVATE SL_HAVE_ONEDNN=1)
    target_link_libraries(sublinear PRIVATE DNNL::dnnl)
  else()
    message(WARNING "sublinear: oneDNN (libdnnl-dev) not found: CPU convolutions use im2col + "
                    "OpenBLAS only")
  endif()
endif()
