# Finds what the Python module needs (Python's headers and pybind11) or says why it is skipped;
# sets STEPSIM_WITH_PYTHON. Built with it, the layers' static libraries are position
# independent, because the module is a shared object made of them.
set(STEPSIM_WITH_PYTHON OFF)
if(NOT STEPSIM_PYTHON)
  return()
endif()
if(STEPSIM_SANITIZE OR CMAKE_CXX_FLAGS MATCHES "-fsanitize")
  # A sanitized module would need the sanitizer's runtime preloaded into the interpreter.
  message(STATUS "stepsim: Python module skipped in a sanitized build")
  return()
endif()
# Debian's own interpreter, whose headers, pybind11 and pandas the packages install, before
# any other python3 on PATH.
if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python3 3.9 QUIET COMPONENTS Interpreter Development.Module)
if(NOT Python3_Development.Module_FOUND)
  message(STATUS "stepsim: Python module skipped: no Python development headers (Debian: python3-dev)")
  return()
endif()
set(PYBIND11_FINDPYTHON ON)
find_package(pybind11 2.6 CONFIG QUIET)
if(NOT pybind11_FOUND)
  message(STATUS "stepsim: Python module skipped: pybind11 not found (Debian: pybind11-dev)")
  return()
endif()
message(STATUS "stepsim: Python module for ${Python3_EXECUTABLE} (${Python3_VERSION}), pybind11 ${pybind11_VERSION}")
set(STEPSIM_WITH_PYTHON ON)
