# varlog_protobuf_c_generate(<out-var> PROTO_ROOT <dir> OUTPUT_DIR <dir> FILES <rel.proto>...)
#
# Runs protoc-c on each FILES entry (a path relative to PROTO_ROOT, which is also the import
# root) and sets <out-var> to the list of generated .pb-c.c files. Nothing generated is
# written to the source tree.
find_program(PROTOC_C_EXECUTABLE NAMES protoc-c REQUIRED)

function(varlog_protobuf_c_generate out_var)
    cmake_parse_arguments(ARG "" "PROTO_ROOT;OUTPUT_DIR" "FILES" ${ARGN})
    if(NOT ARG_PROTO_ROOT OR NOT ARG_OUTPUT_DIR OR NOT ARG_FILES)
        message(FATAL_ERROR "varlog_protobuf_c_generate: PROTO_ROOT, OUTPUT_DIR and FILES are required")
    endif()
    file(MAKE_DIRECTORY ${ARG_OUTPUT_DIR})
    set(all_protos)
    foreach(rel IN LISTS ARG_FILES)
        list(APPEND all_protos ${ARG_PROTO_ROOT}/${rel})
    endforeach()
    set(sources)
    foreach(rel IN LISTS ARG_FILES)
        string(REGEX REPLACE "\\.proto$" "" stem ${rel})
        set(c_out ${ARG_OUTPUT_DIR}/${stem}.pb-c.c)
        set(h_out ${ARG_OUTPUT_DIR}/${stem}.pb-c.h)
        add_custom_command(
            OUTPUT ${c_out} ${h_out}
            COMMAND ${PROTOC_C_EXECUTABLE} --c_out=${ARG_OUTPUT_DIR} -I${ARG_PROTO_ROOT}
                    ${ARG_PROTO_ROOT}/${rel}
            # Imports may change the generated code, so every file of the set is a dependency.
            DEPENDS ${all_protos}
            COMMENT "protoc-c ${rel}"
            VERBATIM)
        list(APPEND sources ${c_out})
    endforeach()
    set(${out_var} ${sources} PARENT_SCOPE)
endfunction()
