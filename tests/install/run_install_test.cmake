# cmake -P script: install BUILD_DIR into WORK_DIR/prefix, then build and run the consumer
# with find_package and with pkg-config (README's rpath recipe: the RUNPATH it gives, and the
# programs run with the .pc files removed); or, given EXAMPLES_DIR instead of CONSUMER_DIR,
# build examples/ both ways and run its producer and consumer against the installed
# varlog-server (RUN_EXAMPLES: the script that does it). Fails on the first step that fails.
function(run)
    execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "failed (${rc}): ${ARGV}\n${out}\n${err}")
    endif()
    set(LAST_OUTPUT "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
# The prefix as given to cmake --install is not normal (a "..", a "//", a trailing slash), as
# a user's may be: the .pc files must still name the normalized prefix (see the libdir check
# below); every later step uses the normal spelling.
file(MAKE_DIRECTORY ${WORK_DIR}/scratch)
set(prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/scratch/..//prefix/)

if(EXAMPLES_DIR)
    # find_package(libvarlog): producer and consumer
    run(${CMAKE_COMMAND} -S ${EXAMPLES_DIR} -B ${WORK_DIR}/examples-build
        -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_C_FLAGS=-Werror)
    run(${CMAKE_COMMAND} --build ${WORK_DIR}/examples-build)
    # pkg-config
    file(GLOB_RECURSE pc_files ${prefix}/*/libvarlog.pc)
    get_filename_component(pc_dir ${pc_files} DIRECTORY)
    get_filename_component(lib_dir ${pc_dir} DIRECTORY)
    set(ENV{PKG_CONFIG_PATH} ${pc_dir})
    run(pkg-config --cflags --libs libvarlog)
    string(STRIP "${LAST_OUTPUT}" flags)
    separate_arguments(flags UNIX_COMMAND "${flags}")
    # README's line: -Wl,-rpath,$(pkg-config --variable=libdir libvarlog)
    run(pkg-config --variable=libdir libvarlog)
    string(STRIP "${LAST_OUTPUT}" pc_libdir)
    unset(ENV{LD_LIBRARY_PATH})
    foreach(example producer consumer hello_append hello_read)
        run(${C_COMPILER} -std=c11 -Wall -Wextra -Werror ${EXAMPLES_DIR}/${example}.c -o
            ${WORK_DIR}/${example}-pc ${flags} -Wl,-rpath,${pc_libdir})
    endforeach()
    # metrics_http also needs libmicrohttpd, optional as the examples' CMake build has it:
    # built and run both ways where that build found it
    set(metrics_cmake "")
    set(metrics_pc "")
    if(EXISTS ${WORK_DIR}/examples-build/metrics_http)
        run(pkg-config --cflags --libs libvarlog libmicrohttpd)
        string(STRIP "${LAST_OUTPUT}" mflags)
        separate_arguments(mflags UNIX_COMMAND "${mflags}")
        run(${C_COMPILER} -std=c11 -Wall -Wextra -Werror ${EXAMPLES_DIR}/metrics_http.c -o
            ${WORK_DIR}/metrics_http-pc ${mflags} -Wl,-rpath,${pc_libdir})
        set(metrics_cmake ${WORK_DIR}/examples-build/metrics_http)
        set(metrics_pc ${WORK_DIR}/metrics_http-pc)
    endif()
    # each build's producer with the other build's consumer, against the installed server;
    # README's first programs (hello_append, hello_read) after them
    run(${RUN_EXAMPLES} ${prefix}/bin/varlog-server ${WORK_DIR}/examples-build/producer
        ${WORK_DIR}/consumer-pc 1000 ${WORK_DIR}/hello_append-pc
        ${WORK_DIR}/examples-build/hello_read ${metrics_pc})
    message(STATUS "examples (find_package producer, pkg-config consumer):\n${LAST_OUTPUT}")
    run(${RUN_EXAMPLES} ${prefix}/bin/varlog-server ${WORK_DIR}/producer-pc
        ${WORK_DIR}/examples-build/consumer 1000 ${WORK_DIR}/examples-build/hello_append
        ${WORK_DIR}/hello_read-pc ${metrics_cmake})
    message(STATUS "examples (pkg-config producer, find_package consumer):\n${LAST_OUTPUT}")
    return()
endif()

# find_package(libvarlog)
run(${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/cmake-build
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_C_COMPILER=${C_COMPILER})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/cmake-build)
run(${WORK_DIR}/cmake-build/consumer)
message(STATUS "find_package consumer: ${LAST_OUTPUT}")
run(${WORK_DIR}/cmake-build/server_consumer)
message(STATUS "find_package server_consumer: ${LAST_OUTPUT}")

# pkg-config
file(GLOB_RECURSE pc_files ${prefix}/*/libvarlog.pc)
list(LENGTH pc_files n_pc)
if(NOT n_pc EQUAL 1)
    message(FATAL_ERROR "expected one installed libvarlog.pc, found: ${pc_files}")
endif()
get_filename_component(pc_dir ${pc_files} DIRECTORY)
get_filename_component(lib_dir ${pc_dir} DIRECTORY)
set(ENV{PKG_CONFIG_PATH} ${pc_dir})
run(pkg-config --cflags libvarlog)
string(STRIP "${LAST_OUTPUT}" cflags)
# Only libvarlog's own include directory: its private dependencies' flags (gRPC's
# -DNOMINMAX, cJSON's -I) are none of a consumer's business (issue 20).
if(NOT cflags MATCHES "^-I[^ ]*/include$")
    message(FATAL_ERROR "pkg-config --cflags libvarlog gives more than its include directory: '${cflags}'")
endif()
run(pkg-config --libs libvarlog)
string(STRIP "${LAST_OUTPUT}" libs)
# The rpath as README shows it: a program built against a prefix outside the loader's
# path starts without LD_LIBRARY_PATH.
run(pkg-config --variable=libdir libvarlog)
string(STRIP "${LAST_OUTPUT}" pc_libdir)
separate_arguments(cflags UNIX_COMMAND "${cflags}")
separate_arguments(libs UNIX_COMMAND "${libs}")
unset(ENV{LD_LIBRARY_PATH})
run(${C_COMPILER} -std=c11 -Wall -Werror ${cflags} ${CONSUMER_DIR}/consumer.c -o
    ${WORK_DIR}/consumer-pc ${libs} -Wl,-rpath,${pc_libdir})
run(${WORK_DIR}/consumer-pc)
message(STATUS "pkg-config consumer: ${LAST_OUTPUT}")
# libvarlog_server.pc: the embedded server's library, libvarlog's flags along
run(pkg-config --cflags --libs libvarlog_server)
string(STRIP "${LAST_OUTPUT}" server_flags)
if(NOT server_flags MATCHES "-lvarlog_server" OR NOT server_flags MATCHES "-lvarlog( |$)")
    message(FATAL_ERROR "pkg-config libvarlog_server gives '${server_flags}'")
endif()
separate_arguments(server_flags UNIX_COMMAND "${server_flags}")
run(${C_COMPILER} -std=c11 -Wall -Werror ${CONSUMER_DIR}/server_consumer.c -o
    ${WORK_DIR}/server_consumer-pc ${server_flags} -Wl,-rpath,${pc_libdir})
run(${WORK_DIR}/server_consumer-pc)
message(STATUS "pkg-config server_consumer: ${LAST_OUTPUT}")

# README's rpath recipe gives the normalized <prefix>/lib, as the CMake package's target does:
# a prefix relative to the .pc file embedded "<prefix>/lib/pkgconfig/../..//lib", which
# stops resolving once the .pc files are gone (issue 23).
cmake_path(NORMAL_PATH lib_dir OUTPUT_VARIABLE want_libdir)
string(REGEX REPLACE "/+$" "" want_libdir "${want_libdir}")
foreach(pc libvarlog libvarlog_server)
    run(pkg-config --variable=libdir ${pc})
    string(STRIP "${LAST_OUTPUT}" got)
    if(NOT got STREQUAL want_libdir)
        message(FATAL_ERROR "pkg-config --variable=libdir ${pc} gives '${got}', not '${want_libdir}'")
    endif()
endforeach()
foreach(program consumer-pc server_consumer-pc)
    run(readelf -d ${WORK_DIR}/${program})
    if(NOT LAST_OUTPUT MATCHES "Library runpath: \\[([^]\n]*)\\]")
        message(FATAL_ERROR "${program} has no RUNPATH:\n${LAST_OUTPUT}")
    endif()
    if(NOT CMAKE_MATCH_1 STREQUAL want_libdir)
        message(FATAL_ERROR "${program}'s RUNPATH is '${CMAKE_MATCH_1}', not '${want_libdir}'")
    endif()
    message(STATUS "${program}: RUNPATH ${CMAKE_MATCH_1}")
endforeach()
# ... and the programs start, and work, with the .pc files gone (deployed without them).
file(REMOVE_RECURSE ${pc_dir})
run(${WORK_DIR}/consumer-pc)
message(STATUS "pkg-config consumer, .pc files removed: ${LAST_OUTPUT}")
run(${WORK_DIR}/server_consumer-pc)
message(STATUS "pkg-config server_consumer, .pc files removed: ${LAST_OUTPUT}")
