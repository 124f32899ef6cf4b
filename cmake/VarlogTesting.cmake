# varlog_add_test(<name> SOURCES <src>... [LIBS <lib>...] [TIMEOUT <s>] [LABELS <l>...] [NO_MEMCHECK]
#                 [ARGS <arg>...])
#
# Builds a cmocka test program, registers it with CTest, and, when valgrind is available and
# no sanitizer is on, registers a valgrind copy named <name>_memcheck with the label memcheck
# (run by `make memcheck`; `make test` leaves it out).
find_program(VALGRIND_EXECUTABLE valgrind)
set(VARLOG_SUPP_DIR ${PROJECT_SOURCE_DIR}/tests/sanitizers)
# ignore_noninstrumented_modules: gRPC, abseil and protobuf-c are not built with TSan, so every
# byte they pass through an intercepted call (sendmsg, recvmsg, memcpy) "races" with our writes
# and is suppressed only after a costly report path that grows with each address reported:
# gRPC's writer thread spent seconds per sendmsg, the transport starved, and tests failed under
# load (issue 8, point 15). Races inside our own code are still found.
set(VARLOG_TEST_ENV
    "TSAN_OPTIONS=suppressions=${VARLOG_SUPP_DIR}/tsan.supp history_size=7 halt_on_error=1 ignore_noninstrumented_modules=1"
    "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")

function(varlog_add_test name)
    cmake_parse_arguments(ARG "NO_MEMCHECK" "TIMEOUT" "SOURCES;LIBS;LABELS;ARGS" ${ARGN})
    if(NOT ARG_TIMEOUT)
        set(ARG_TIMEOUT 120)
    endif()
    add_executable(${name} ${ARG_SOURCES})
    target_link_libraries(${name} PRIVATE ${ARG_LIBS} PkgConfig::CMOCKA varlog_build_flags Threads::Threads)
    add_test(NAME ${name} COMMAND ${name} ${ARG_ARGS})
    set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT} LABELS "unit;${ARG_LABELS}"
        ENVIRONMENT "${VARLOG_TEST_ENV}")
    if(VALGRIND_EXECUTABLE AND NOT VARLOG_SANITIZE AND NOT ARG_NO_MEMCHECK)
        add_test(NAME ${name}_memcheck
            COMMAND ${VALGRIND_EXECUTABLE} --error-exitcode=99 --leak-check=full
                    --show-leak-kinds=all --errors-for-leak-kinds=all
                    --suppressions=${VARLOG_SUPP_DIR}/grpc.supp $<TARGET_FILE:${name}> ${ARG_ARGS})
        math(EXPR memcheck_timeout "${ARG_TIMEOUT} * 10")
        set_tests_properties(${name}_memcheck PROPERTIES TIMEOUT ${memcheck_timeout}
            LABELS "memcheck;${ARG_LABELS}" ENVIRONMENT "VARLOG_UNDER_VALGRIND=1")
    endif()
endfunction()

# varlog_test_child_server(<name>)
#
# For a test whose server is varlog-server run as a child process (bench/child_server.h): its
# sources, header and the program's path (VARLOG_SERVER_PROGRAM), built before the test, and
# tests/client/child_env.h (such a server and one client of it).
function(varlog_test_child_server name)
    target_sources(${name} PRIVATE ${PROJECT_SOURCE_DIR}/bench/child_server.c
        ${PROJECT_SOURCE_DIR}/tests/client/child_env.c)
    target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/bench
        ${PROJECT_SOURCE_DIR}/tests/client)
    target_compile_definitions(${name} PRIVATE
        VARLOG_SERVER_PROGRAM="$<TARGET_FILE:varlog-server>")
    add_dependencies(${name} varlog-server)
endfunction()

# varlog_add_test_variant(<name> <variant> <VAR=value>... [TIMEOUT seconds])
#
# Runs test <name>'s executable again as <name>_<variant> with more environment: a suite
# checked under another setting (VARLOG_TEST_CONF, tests/client/client_fixture.h) without a
# second build. Not under valgrind: the plain copy's memcheck covers the code.
function(varlog_add_test_variant name variant)
    cmake_parse_arguments(ARG "" "TIMEOUT" "" ${ARGN})
    if(NOT ARG_TIMEOUT)
        set(ARG_TIMEOUT 120)
    endif()
    add_test(NAME ${name}_${variant} COMMAND ${name})
    set_tests_properties(${name}_${variant} PROPERTIES TIMEOUT ${ARG_TIMEOUT} LABELS "unit"
        ENVIRONMENT "${VARLOG_TEST_ENV};${ARG_UNPARSED_ARGUMENTS}")
endfunction()
