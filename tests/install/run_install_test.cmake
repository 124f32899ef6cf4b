# cmake -P script: install BUILD_DIR into WORK_DIR/prefix, then build and run the consumer
# with find_package and with pkg-config; or, given EXAMPLES_DIR instead of CONSUMER_DIR,
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
set(prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

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
    foreach(example producer consumer)
        run(${C_COMPILER} -std=c11 -Wall -Wextra -Werror ${EXAMPLES_DIR}/${example}.c -o
            ${WORK_DIR}/${example}-pc ${flags} -Wl,-rpath,${lib_dir})
    endforeach()
    # each build's producer with the other build's consumer, against the installed server
    run(${RUN_EXAMPLES} ${prefix}/bin/varlog-server ${WORK_DIR}/examples-build/producer
        ${WORK_DIR}/consumer-pc 1000)
    message(STATUS "examples (find_package producer, pkg-config consumer):\n${LAST_OUTPUT}")
    run(${RUN_EXAMPLES} ${prefix}/bin/varlog-server ${WORK_DIR}/producer-pc
        ${WORK_DIR}/examples-build/consumer 1000)
    message(STATUS "examples (pkg-config producer, find_package consumer):\n${LAST_OUTPUT}")
    return()
endif()

# find_package(libvarlog)
run(${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/cmake-build
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_C_COMPILER=${C_COMPILER})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/cmake-build)
run(${WORK_DIR}/cmake-build/consumer)
message(STATUS "find_package consumer: ${LAST_OUTPUT}")

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
run(pkg-config --libs libvarlog)
string(STRIP "${LAST_OUTPUT}" libs)
separate_arguments(cflags UNIX_COMMAND "${cflags}")
separate_arguments(libs UNIX_COMMAND "${libs}")
run(${C_COMPILER} -std=c11 -Wall -Werror ${cflags} ${CONSUMER_DIR}/consumer.c -o
    ${WORK_DIR}/consumer-pc ${libs} -Wl,-rpath,${lib_dir})
run(${WORK_DIR}/consumer-pc)
message(STATUS "pkg-config consumer: ${LAST_OUTPUT}")
