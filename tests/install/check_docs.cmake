# cmake -P script (-DSOURCE_DIR=...): what README and the public headers promise a new user
# (issue 20) stays written, and stays true to the files it copies:
#  - every code block that follows `<!-- examples/FILE -->` in README is FILE, byte for byte
#    (the install test builds and runs those files);
#  - NO_LOG_STREAM has one meaning, the same words in error.h and client.h;
#  - varlog_trim's header says what it cannot trim;
#  - README states both record size limits in the appender's tour, what its throughput
#    figures assume, the server library's CMake target and pkg-config module, and the rpath.
set(failures "")
# require("CONDITION" "what is wrong"): CONDITION as if() takes it, given as one string.
macro(require cond text)
    cmake_language(EVAL CODE "if(NOT (${cond}))\n  string(APPEND failures \"\\n  ${text}\")\nendif()")
endmacro()

file(READ ${SOURCE_DIR}/README.md readme)

# README's copies of examples/
string(REGEX MATCHALL "<!-- examples/[a-z_]+\\.c -->\n```c\n" markers "${readme}")
list(LENGTH markers n_markers)
require("n_markers GREATER_EQUAL 2" "README: fewer than 2 <!-- examples/FILE --> blocks")
foreach(marker IN LISTS markers)
    string(REGEX REPLACE "<!-- (examples/[a-z_]+\\.c) -->.*" "\\1" file "${marker}")
    string(FIND "${readme}" "${marker}" at)
    string(LENGTH "${marker}" mlen)
    math(EXPR start "${at} + ${mlen}")
    string(SUBSTRING "${readme}" ${start} -1 rest)
    string(FIND "${rest}" "```\n" end)
    string(SUBSTRING "${rest}" 0 ${end} block)
    file(READ ${SOURCE_DIR}/${file} content)
    require("block STREQUAL content" "README's copy of ${file} differs from the file")
endforeach()

# One meaning of NO_LOG_STREAM: the words, with comment markers and line breaks folded.
set(no_ls "no log stream of the topic can take appends: it has none, or every one is sealed, even in metadata fetched within metadata.recheck.interval.ms")
foreach(header error.h client.h)
    file(READ ${SOURCE_DIR}/client/include/varlog/${header} text)
    string(REGEX REPLACE "\n[ ]*\\*?[ ]*" " " text "${text}")
    string(REGEX REPLACE "  +" " " text "${text}")
    string(FIND "${text}" "${no_ls}" at)
    require("at GREATER -1" "${header}: NO_LOG_STREAM is not described as '${no_ls}'")
endforeach()
file(READ ${SOURCE_DIR}/client/include/varlog/subscribe.h text)
string(REGEX REPLACE "\n[ ]*\\*?[ ]*" " " text "${text}")
string(FIND "${text}" "a node trims no further than its high watermark and skips sealed replicas" at)
require("at GREATER -1" "subscribe.h: varlog_trim does not say it trims no further than the high watermark")

# README, section by section
function(section out title)
    string(FIND "${readme}" "${title}\n" at)
    if(at EQUAL -1)
        set(${out} "" PARENT_SCOPE)
        return()
    endif()
    string(SUBSTRING "${readme}" ${at} -1 rest)
    string(LENGTH "${title}" tlen)
    string(SUBSTRING "${rest}" ${tlen} -1 body)
    string(FIND "${body}" "\n##" next) # a heading; "#include" in a code block is not one
    string(SUBSTRING "${body}" 0 ${next} body)
    set(${out} "${body}" PARENT_SCOPE)
endfunction()
section(appender "### Appending fast: the pipelined appender")
string(FIND "${appender}" "append.record.max.bytes" a)
string(FIND "${appender}" "appender.batch.max.bytes" b)
require("a GREATER -1 AND b GREATER -1" "README's appender tour does not state both record size limits")
section(tuning "## Tuning")
string(FIND "${tuning}" "They assume the machine otherwise idle" a)
require("a GREATER -1" "README's Tuning does not say what its figures assume")
section(installed "## Using the installed library")
foreach(needle "libvarlog::varlog_server" "pkg-config --cflags --libs libvarlog"
        "-Wl,-rpath,$(pkg-config --variable=libdir libvarlog)" "libvarlog_server" "LD_LIBRARY_PATH")
    string(FIND "${installed}" "${needle}" a)
    require("a GREATER -1" "README's 'Using the installed library' lacks '${needle}'")
endforeach()
section(first "## Your first program")
string(FIND "${first}" "-Wl,-rpath,$(pkg-config --variable=libdir libvarlog)" a)
require("a GREATER -1" "README's first program is not built with the rpath line")

if(failures)
    message(FATAL_ERROR "README and headers:${failures}")
endif()
message(STATUS "README and headers: as promised (${n_markers} example copies checked)")
