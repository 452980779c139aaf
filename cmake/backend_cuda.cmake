# The cuda backend (not yet written): reports itself off.
if(XFA_CUDA STREQUAL "ON")
  message(FATAL_ERROR "XFA_CUDA=ON but the cuda backend is not implemented yet")
endif()
set(XFA_CUDA_SUMMARY "off (not implemented yet)")
