target_sources(opapi_nn PRIVATE ${CMAKE_CURRENT_LIST_DIR}/tensor_checks.cpp ${CMAKE_CURRENT_LIST_DIR}/vector_state.cpp)
