# The CUDA backend (src/cuda): built when nvcc, the CUDA toolkit and cuDNN
# are found (SL_CUDA=ON, the default); otherwise src/cuda/cuda_none.c
# answers that this build has no CUDA. Architecture 90 (H100/H200) unless
# CMAKE_CUDA_ARCHITECTURES says otherwise ("native" needs a GPU).
set(SL_HAVE_CUDA OFF)
if(SL_CUDA)
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit)
    find_library(CUDNN_LIB cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
    find_path(CUDNN_INCLUDE cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    if(CUDAToolkit_FOUND AND CUDNN_LIB AND CUDNN_INCLUDE)
      set(SL_HAVE_CUDA ON)
    else()
      message(STATUS "sublinear: CUDA toolkit or cuDNN not found, building CPU only")
    endif()
  endif()
endif()

if(SL_HAVE_CUDA)
  message(STATUS "sublinear: CUDA backend on (architectures ${CMAKE_CUDA_ARCHITECTURES}, cuDNN ${CUDNN_LIB})")
  file(GLOB SL_CUDA_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/cuda/*.cu)
  target_sources(sublinear PRIVATE ${SL_CUDA_SOURCES})
  target_compile_definitions(sublinear PRIVATE SL_HAVE_CUDA=1)
  target_include_directories(sublinear PRIVATE ${CUDNN_INCLUDE})
  target_link_libraries(sublinear PRIVATE CUDA::cudart CUDA::cublas CUDA::cublasLt ${CUDNN_LIB})
  set_target_properties(sublinear PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON
    CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}")
  # No C++ exceptions: the backend reports failures as sl_status (nothing in
  # it throws), and without unwind tables the library exports no C++
  # personality reference (DW.ref.__gxx_personality_v0).
  # --fmad=false: the element rules (src/base/element.h) are the CPU's
  # arithmetic, which gcc in C11 mode compiles without contracting a * b + c
  # into one fused multiply-add; nvcc contracts by default, which would
  # round differently from the tested CPU. These kernels are memory-bound,
  # so the separate rounding costs nothing measurable (cuDNN and cuBLAS are
  # not affected).
  target_compile_options(sublinear PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:--extended-lambda --fmad=false -Xcompiler=-Wall,-Wextra,-fno-exceptions -Wno-deprecated-gpu-targets>)
  # CUB (the embedding backward's stable sort) without its NVTX ranges:
  # they would bring NVTX's C-named injection symbols into the archive.
  target_compile_definitions(sublinear PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:CCCL_DISABLE_NVTX>)
  if(SL_WERROR)
    target_compile_options(sublinear PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>)
  endif()
else()
  target_sources(sublinear PRIVATE ${PROJECT_SOURCE_DIR}/src/cuda/cuda_none.c)
endif()
