# The vulkan backend (not yet written): reports itself off.
if(XFA_VULKAN STREQUAL "ON")
  message(FATAL_ERROR "XFA_VULKAN=ON but the vulkan backend is not implemented yet")
endif()
set(XFA_VULKAN_SUMMARY "off (not implemented yet)")
