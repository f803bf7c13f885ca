# One place that sets stepsim's warnings; -Werror only when STEPSIM_WERROR is on (CI).
function(stepsim_set_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
    -Wunused -Woverloaded-virtual -Wimplicit-fallthrough
    $<$<BOOL:${STEPSIM_WERROR}>:-Werror>)
endfunction()

# A stepsim static library for one layer under sim/: headers beside the sources, included
# as "layer/file.hpp", the public API from include/. Each layer's folder is visible only to
# itself and to the targets that link it (directly or through a layer above): the include
# path holds a folder per layer with one link, build/layers/<layer>/<layer> -> sim/<layer>,
# so including a header of a layer that is not linked fails to compile.
function(stepsim_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(stepsim_${name} STATIC ${ARG_SOURCES})
  add_library(stepsim::${name} ALIAS stepsim_${name})
  set(root ${PROJECT_BINARY_DIR}/layers/${name})
  file(MAKE_DIRECTORY ${root})
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/sim/${name} ${root}/${name} SYMBOLIC)
  target_include_directories(stepsim_${name} PUBLIC ${PROJECT_SOURCE_DIR}/include ${root})
  target_link_libraries(stepsim_${name} PUBLIC ${ARG_DEPS})
  stepsim_set_warnings(stepsim_${name})
  if(STEPSIM_WITH_PYTHON)
    # Linked into the Python module too. Without semantic interposition the compiler still
    # inlines the library's own functions into one another, as it does for the program alone.
    set_target_properties(stepsim_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    target_compile_options(stepsim_${name} PRIVATE -fno-semantic-interposition)
  endif()
endfunction()
