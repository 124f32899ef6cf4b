"""Builds varlog._varlog against libvarlog.

Where the library comes from, first match wins:
  VARLOG_BUILD_DIR=<cmake build dir>  this repository's build tree (headers from the source
                                      tree, libvarlog and libvarlog_server from the build
                                      dir, an rpath to them); `make python` uses it;
  pkg-config libvarlog libvarlog_server  an installed libvarlog;
  ../build                            the default build tree beside this directory.
Extra compiler flags: VARLOG_PY_CFLAGS (e.g. "-Werror" in the tests' build).
"""

import os
import shlex
import subprocess

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def from_build_tree(build):
    build = os.path.abspath(build)
    libdirs = [os.path.join(build, "client"), os.path.join(build, "server")]
    return dict(include_dirs=[os.path.join(REPO, "client", "include"),
                              os.path.join(REPO, "server", "include")],
                library_dirs=libdirs, runtime_library_dirs=libdirs,
                libraries=["varlog", "varlog_server"])


def from_pkg_config():
    try:
        cflags = subprocess.check_output(["pkg-config", "--cflags", "libvarlog", "libvarlog_server"],
                                         text=True, stderr=subprocess.DEVNULL)
        libs = subprocess.check_output(["pkg-config", "--libs", "libvarlog", "libvarlog_server"],
                                       text=True, stderr=subprocess.DEVNULL)
        libdir = subprocess.check_output(["pkg-config", "--variable=libdir", "libvarlog"],
                                         text=True).strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    args = shlex.split(cflags) + shlex.split(libs)
    return dict(include_dirs=[a[2:] for a in args if a.startswith("-I")],
                library_dirs=[a[2:] for a in args if a.startswith("-L")],
                runtime_library_dirs=[libdir],
                libraries=[a[2:] for a in args if a.startswith("-l")])


def lib_config():
    if os.environ.get("VARLOG_BUILD_DIR"):
        return from_build_tree(os.environ["VARLOG_BUILD_DIR"])
    return from_pkg_config() or from_build_tree(os.path.join(REPO, "build"))


ext = Extension(
    "varlog._varlog",
    sources=[os.path.join("src", f) for f in
             ("module.c", "client.c", "future.c", "appender.c", "appender_settle.c",
              "subscription.c", "subscription_handler.c", "admin_server.c")],
    depends=[os.path.join("src", f) for f in
             ("varlog_py.h", "subscription.h", "appender_internal.h")],
    extra_compile_args=["-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Wshadow",
                        "-Wno-missing-field-initializers", "-Wno-cast-function-type"]
    + shlex.split(os.environ.get("VARLOG_PY_CFLAGS", "")),
    **lib_config(),
)

setup(ext_modules=[ext])
