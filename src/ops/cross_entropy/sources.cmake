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
