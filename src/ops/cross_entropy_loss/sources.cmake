# aclnnCrossEntropyLoss, the forward of aclnnCrossEntropyLossGrad.
target_sources(opapi_nn PRIVATE
    ${CMAKE_CURRENT_LIST_DIR}/loss_api.cpp
    ${CMAKE_CURRENT_LIST_DIR}/loss_check.cpp
    ${CMAKE_CURRENT_LIST_DIR}/loss_rows.cpp
    ${CMAKE_CURRENT_LIST_DIR}/loss_plan.cpp
    ${CMAKE_CURRENT_LIST_DIR}/kernels/loss_registry.cpp
    ${CMAKE_CURRENT_LIST_DIR}/kernels/loss_reference.cpp
    ${CMAKE_CURRENT_LIST_DIR}/kernels/loss_hwy.cpp)
# The kernel sources include "kernels/loss_kernel.h" relative to this folder.
target_include_directories(opapi_nn PRIVATE ${CMAKE_CURRENT_LIST_DIR})
# No contraction of a*b+c into FMA: every Highway target performs the same operations and the results are bitwise
# identical across targets (SSE4/SCALAR have no FMA). See kernels/loss_hwy.cpp.
# (-ffp-contract=off for every file, and lighter debug information for this one in the sanitizer builds: see the
# top-level CMakeLists.txt.)
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/kernels/loss_hwy.cpp
    PROPERTIES COMPILE_OPTIONS "${OPENACLNN_KERNEL_COMPILE_OPTIONS}")
