target_sources(opapi_nn PRIVATE
    ${CMAKE_CURRENT_LIST_DIR}/grad_api.cpp
    ${CMAKE_CURRENT_LIST_DIR}/grad_check.cpp
    ${CMAKE_CURRENT_LIST_DIR}/grad_rows.cpp
    ${CMAKE_CURRENT_LIST_DIR}/grad_plan.cpp
    ${CMAKE_CURRENT_LIST_DIR}/kernels/grad_registry.cpp
    ${CMAKE_CURRENT_LIST_DIR}/kernels/grad_reference.cpp)
# Further kernel files register themselves in kernels/sources.cmake.
if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/kernels/sources.cmake)
    include(${CMAKE_CURRENT_LIST_DIR}/kernels/sources.cmake)
endif()
target_include_directories(opapi_nn PRIVATE ${CMAKE_CURRENT_LIST_DIR})
# The reference kernel computes ExpDouble's steps one rounding each, as the SIMD kernels do: no contraction (every
# file; see the top-level CMakeLists.txt), and the kernels' lighter debug information in the sanitizer builds.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/kernels/grad_reference.cpp
    PROPERTIES COMPILE_OPTIONS "${OPENACLNN_KERNEL_COMPILE_OPTIONS}")
