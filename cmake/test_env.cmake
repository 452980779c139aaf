# The environment every test runs in: runtime caches in the build tree, plus what each
# backend asks for (XFA_<BACKEND>_TEST_ENV: a driver pin, the validation layer). Applied to
# all tests, since crosscheck and the examples run every backend.
set(XFA_TEST_ENVIRONMENT "XDG_CACHE_HOME=${PROJECT_BINARY_DIR}/cache")
foreach(backend ${XFA_BUILT_BACKENDS})
  string(TOUPPER ${backend} upper)
  if(XFA_${upper}_TEST_ENV)
    list(APPEND XFA_TEST_ENVIRONMENT ${XFA_${upper}_TEST_ENV})
  endif()
endforeach()

# Called at the end of each directory that adds tests (CMake sets test properties per directory).
function(xfa_apply_test_environment)
  get_property(tests DIRECTORY PROPERTY TESTS)
  if(tests)
    set_tests_properties(${tests} PROPERTIES ENVIRONMENT "${XFA_TEST_ENVIRONMENT}")
  endif()
endfunction()
