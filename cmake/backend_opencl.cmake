# The opencl backend (not yet written): reports itself off.
if(XFA_OPENCL STREQUAL "ON")
  message(FATAL_ERROR "XFA_OPENCL=ON but the opencl backend is not implemented yet")
endif()
set(XFA_OPENCL_SUMMARY "off (not implemented yet)")
