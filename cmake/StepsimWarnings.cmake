# One place that sets stepsim's warnings; -Werror only when STEPSIM_WERROR is on (CI).
function(stepsim_set_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
    -Wunused -Woverloaded-virtual -Wimplicit-fallthrough
    $<$<BOOL:${STEPSIM_WERROR}>:-Werror>)
endfunction()

# A stepsim static library for one layer under sim/: headers beside the sources, included
# as "layer/file.hpp" from sim/, the public API from include/.
function(stepsim_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(stepsim_${name} STATIC ${ARG_SOURCES})
  add_library(stepsim::${name} ALIAS stepsim_${name})
  target_include_directories(stepsim_${name} PUBLIC
    ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/sim)
  target_link_libraries(stepsim_${name} PUBLIC ${ARG_DEPS})
  stepsim_set_warnings(stepsim_${name})
endfunction()
