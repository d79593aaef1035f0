# The gradient's SIMD kernels (Highway, every target in one file). Included by ../sources.cmake.
target_sources(opapi_nn PRIVATE ${CMAKE_CURRENT_LIST_DIR}/grad_hwy.cpp)
target_include_directories(opapi_nn PRIVATE ${CMAKE_CURRENT_LIST_DIR}/..)
# No contraction of a*b+c by the compiler: the kernels fuse exactly where they call Fma, which every target
# performs with one rounding (the instruction, or std::fmaf per lane), so the results are bitwise identical on
# every target. See grad_hwy-inl.h.
# (-ffp-contract=off for every file, and lighter debug information for this one in the sanitizer builds: see the
# top-level CMakeLists.txt.)
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/grad_hwy.cpp
    PROPERTIES COMPILE_OPTIONS "${OPENACLNN_KERNEL_COMPILE_OPTIONS}")
